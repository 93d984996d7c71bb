import { useState, type FormEvent, type KeyboardEvent } from "react";

interface ComposerProps {
  /** Sending is blocked (a reply is streaming, or a decision is pending); typing is not. */
  disabled: boolean;
  /** Stop is offered: a reply is streaming, or a run waits for a decision. */
  stoppable: boolean;
  onSend: (text: string) => void;
  onStop: () => void;
}

export function Composer({ disabled, stoppable, onSend, onStop }: ComposerProps) {
  const [draft, setDraft] = useState("");
  const empty = draft.trim().length === 0;
  const canSend = !disabled && !empty;

  const submit = () => {
    if (!canSend) return;
    onSend(draft);
    setDraft("");
  };

  const handleSubmit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    submit();
  };

  const handleKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key !== "Enter" || event.shiftKey || event.nativeEvent.isComposing) return;
    event.preventDefault();
    submit();
  };

  return (
    <form className="composer" data-testid="composer" onSubmit={handleSubmit}>
      <textarea
        className="composer__input"
        data-testid="message-input"
        aria-label="Message"
        placeholder="Type a message — Enter to send, Shift+Enter for a new line"
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
        disabled={!stoppable}
        onClick={() => onStop()}
      >
        Stop
      </button>
    </form>
  );
}
