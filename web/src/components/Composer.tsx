import { useId, useState, type FormEvent, type KeyboardEvent } from "react";

const PLACEHOLDER = "Type a message — Enter to send, Shift+Enter for a new line";
/** While sending is blocked, for a reason shown above the box: it may be typed, not sent. */
const PLACEHOLDER_BLOCKED = "Type your next message";

interface ComposerProps {
  /** Sending is blocked (a reply is streaming, or a decision is pending); typing is not. */
  disabled: boolean;
  /** Why sending is blocked, when the user has something to do about it; shown under the box. */
  blockedBecause?: string | null;
  /** Stop is offered: a reply is streaming, or a run waits for a decision. */
  stoppable: boolean;
  /** A reply is streaming: Escape in the box stops it, as Stop does. */
  replying: boolean;
  /** Resolves whether the message went: false (refused before it started) puts it back in the box. */
  onSend: (text: string) => Promise<boolean>;
  onStop: () => void;
}

export function Composer({ disabled, blockedBecause = null, stoppable, replying, onSend, onStop }: ComposerProps) {
  const [draft, setDraft] = useState("");
  const hintId = useId();
  const empty = draft.trim().length === 0;
  const canSend = !disabled && !empty;

  const submit = () => {
    if (!canSend) return;
    const text = draft;
    setDraft("");
    void onSend(text).then((went) => {
      // Back in the box to fix and send again — before anything typed since, so nothing is lost.
      if (!went) setDraft((typed) => (typed.trim() ? `${text}\n\n${typed}` : text));
    });
  };

  const handleSubmit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    submit();
  };

  const handleKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.nativeEvent.isComposing) return;
    if (event.key === "Escape" && replying) {
      event.preventDefault();
      onStop();
      return;
    }
    if (event.key !== "Enter" || event.shiftKey) return;
    event.preventDefault();
    submit();
  };

  return (
    <form className="composer" data-testid="composer" onSubmit={handleSubmit}>
      {blockedBecause ? (
        <p className="composer__hint" id={hintId} data-testid="composer-hint">
          {blockedBecause}
        </p>
      ) : null}
      <div className="composer__row">
        <textarea
          className="composer__input"
          data-testid="message-input"
          aria-label="Message"
          aria-describedby={blockedBecause ? hintId : undefined}
          placeholder={blockedBecause ? PLACEHOLDER_BLOCKED : PLACEHOLDER}
          rows={2}
          value={draft}
          onChange={(event) => setDraft(event.target.value)}
          onKeyDown={handleKeyDown}
        />
        <button className="button button--primary" data-testid="send" type="submit" disabled={!canSend}>
          Send
        </button>
        <button
          className="button button--secondary"
          data-testid="stop"
          type="button"
          title={replying ? "Stop the reply (Esc)" : undefined}
          disabled={!stoppable}
          onClick={() => onStop()}
        >
          Stop
        </button>
      </div>
    </form>
  );
}
