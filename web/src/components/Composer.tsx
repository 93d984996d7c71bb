import { useId, useState, type FormEvent, type KeyboardEvent, type RefObject } from "react";

/** The message box's id: the page's skip link leads to it. */
export const MESSAGE_BOX_ID = "message-box";

const PLACEHOLDER = "Type a message — Enter to send, Shift+Enter for a new line";
/** While sending is blocked, for a reason shown under the box: it may be typed, not sent. */
const PLACEHOLDER_BLOCKED = "Type your next message";

interface ComposerProps {
  /** Sending is blocked (a reply is streaming, or a decision is pending); typing is not. */
  disabled: boolean;
  /**
   * Why sending is blocked, when the user has something to do about it: the reason shows
   * under the box, as a button that takes the user there (`show`).
   */
  blocker?: { reason: string; show: () => void } | null;
  /** Stop is offered: a reply is streaming, or a run waits for a decision. */
  stoppable: boolean;
  /** A reply is streaming: Escape in the box stops it, as Stop does. */
  replying: boolean;
  /** Resolves whether the message went: false (refused before it started) puts it back in the box. */
  onSend: (text: string) => Promise<boolean>;
  onStop: () => void;
  /** The message box, for the page to give the focus back to. */
  boxRef: RefObject<HTMLTextAreaElement | null>;
}

export function Composer({ disabled, blocker = null, stoppable, replying, onSend, onStop, boxRef }: ComposerProps) {
  const [draft, setDraft] = useState("");
  const hintId = useId();
  const empty = draft.trim().length === 0;
  const canSend = !disabled && !empty;

  const submit = () => {
    if (!canSend) return;
    const text = draft;
    setDraft("");
    boxRef.current?.focus(); // sent with the Send button, which now turns off
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
      <div className="composer__row">
        <textarea
          ref={boxRef}
          id={MESSAGE_BOX_ID}
          className="composer__input"
          data-testid="message-input"
          aria-label="Message"
          aria-describedby={blocker ? hintId : undefined}
          placeholder={blocker ? PLACEHOLDER_BLOCKED : PLACEHOLDER}
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
          onClick={() => {
            onStop();
            boxRef.current?.focus(); // Stop turns off
          }}
        >
          Stop
        </button>
      </div>
      {/* After the box in the tab order, so Tab from the box finds what blocks it. */}
      {blocker ? (
        <button type="button" className="composer__hint" id={hintId} data-testid="composer-hint" onClick={blocker.show}>
          {blocker.reason}
        </button>
      ) : null}
    </form>
  );
}
