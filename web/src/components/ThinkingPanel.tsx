import { shownText } from "../bidi";

export function ThinkingPanel({ text }: { text: string }) {
  if (!text) return null;
  return (
    <details className="thinking" data-testid="thinking" open>
      <summary className="thinking__summary">Thinking</summary>
      <p className="thinking__text" dir="auto">
        {shownText(text)}
      </p>
    </details>
  );
}
