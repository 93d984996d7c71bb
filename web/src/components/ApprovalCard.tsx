import { useId, useState, type FormEvent, type RefObject } from "react";
import { useAgent } from "@thinwire/react";
import { shownText } from "../bidi";

interface ApprovalCardProps {
  /** The answers: a button per option, or the free answer's box and button. */
  answersRef: RefObject<HTMLDivElement | null>;
  /** An answer was given: the card goes, and the focus with it unless it is put elsewhere. */
  onDecided: () => void;
}

/**
 * The question a paused run asks — its prompt, its public details and one
 * button per answer — read from the conversation of the page's AgentProvider.
 */
export function ApprovalCard({ answersRef, onDecided }: ApprovalCardProps) {
  const { interrupt, status, decide } = useAgent();
  const promptId = useId();
  if (!interrupt) return null;
  // Answers wait while a reply streams.
  const disabled = status === "streaming" || status === "reconnecting";
  // A refused decision shows in the hook's `error`, and the card stays.
  const onDecide = (value: unknown) => {
    void decide(value).catch(() => undefined);
    onDecided();
  };
  const { prompt, options, payload } = interrupt;
  return (
    <section className="approval" data-testid="approval" aria-live="polite" aria-label="Decision needed">
      <p className="approval__prompt" id={promptId} data-testid="approval-prompt">
        {prompt}
      </p>
      <Payload value={payload} />
      {/* Named by the prompt: a screen reader reaching an answer hears the question. */}
      <div role="group" aria-labelledby={promptId} ref={answersRef}>
        {options === null ? (
          <FreeAnswer disabled={disabled} onDecide={onDecide} />
        ) : (
          <div className="approval__options">
            {options.map((option, index) => (
              <button
                key={option}
                className={`button ${index === 0 ? "button--primary" : "button--secondary"}`}
                data-testid={`decide-${option}`}
                type="button"
                disabled={disabled}
                onClick={() => onDecide(option)}
              >
                {capitalize(option)}
              </button>
            ))}
          </div>
        )}
      </div>
    </section>
  );
}

/** The payload's own fields, as a definition list; anything but an object as its JSON. */
function Payload({ value }: { value: unknown }) {
  if (value === null || value === undefined) return null;
  if (typeof value !== "object" || Array.isArray(value)) {
    return (
      <pre className="approval__payload" data-testid="approval-payload">
        {show(value)}
      </pre>
    );
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return null;
  return (
    <dl className="approval__payload" data-testid="approval-payload">
      {entries.map(([key, item]) => (
        <div className="approval__field" key={key}>
          <dt>{shownText(key)}</dt>
          <dd>{show(item)}</dd>
        </div>
      ))}
    </dl>
  );
}

/** A free-form answer: the typed text is the value. */
function FreeAnswer({ disabled, onDecide }: { disabled: boolean; onDecide: (value: unknown) => void }) {
  const [draft, setDraft] = useState("");
  const empty = draft.trim().length === 0;
  const handleSubmit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (disabled || empty) return;
    onDecide(draft);
    setDraft("");
  };
  return (
    <form className="approval__free" onSubmit={handleSubmit}>
      <input
        className="approval__input"
        data-testid="decide-free-input"
        aria-label="Your answer"
        value={draft}
        onChange={(event) => setDraft(event.target.value)}
      />
      <button className="button button--primary" data-testid="decide-free" type="submit" disabled={disabled || empty}>
        Answer
      </button>
    </form>
  );
}

/** The payload is the agent's JSON as it gave it (the prompt and options come cleaned). */
function show(value: unknown): string {
  return shownText(typeof value === "string" ? value : JSON.stringify(value));
}

function capitalize(option: string): string {
  return option.charAt(0).toUpperCase() + option.slice(1);
}
