import { useState, type FormEvent, type KeyboardEvent } from "react";
import type { AgentTurn } from "../agent-types";
import { shownText } from "../bidi";

/** How a reply ended, when it did not simply end; one that asked a question shows the question instead. */
const ENDINGS: Partial<Record<NonNullable<AgentTurn["stopReason"]>, string>> = {
  interrupted: "This reply was interrupted.",
  stopped: "Stopped.",
  error: "This reply failed.",
  detached: "The connection was lost before this reply ended: reload to see the rest.",
};

const STATE_LABEL: Record<AgentTurn["activity"][number]["state"], string> = {
  running: "no result",
  ok: "done",
  error: "failed",
};

export interface TurnActions {
  /** Nothing streams and no decision waits: a turn can be edited, regenerated or switched. */
  enabled: boolean;
  onRegenerate: () => void;
  onEdit: (turnId: string, text: string) => void;
  onBranch: (turnId: string, index: number) => void;
  /** An edit the server refused before its run began: its text goes back in its box. */
  refusedEdit: { turnId: string; text: string } | null;
  /** The box of the refused edit was closed: sent again, or cancelled. */
  onEditClosed: () => void;
}

interface TurnViewProps {
  turn: AgentTurn;
  /** The last reply of the conversation: the one a regeneration replaces. */
  last?: boolean;
  actions: TurnActions;
}

export function TurnView({ turn, last = false, actions }: TurnViewProps) {
  const { id, role, text, toolCalls, streaming, stopReason, asked, siblings, siblingIndex } = turn;
  const [editing, setEditing] = useState(false);
  const refused = actions.refusedEdit?.turnId === id ? actions.refusedEdit.text : null;
  const ending = !asked && stopReason ? ENDINGS[stopReason] : undefined;
  const author = role === "user" ? "You" : "Assistant";
  return (
    <article
      className={`turn turn--${role}`}
      data-testid="turn"
      data-role={role}
      data-streaming={String(streaming)}
      data-turn-id={id}
      data-sibling-index={siblingIndex}
      data-siblings={siblings}
      aria-label={`Message from ${author.toLowerCase()}`}
    >
      <div className="turn__head">
        <p className="turn__author">{author}</p>
        {role === "user" && siblings > 1 ? <BranchSwitch turn={turn} actions={actions} /> : null}
      </div>
      {editing || refused !== null ? (
        <EditForm
          initial={refused ?? text}
          onCancel={() => {
            setEditing(false);
            actions.onEditClosed();
          }}
          onSave={(next) => {
            setEditing(false);
            actions.onEdit(id, next);
          }}
        />
      ) : (
        <div className="turn__text" data-testid="turn-text" dir="auto">
          {shownText(text)}
          {streaming ? <span className="turn__cursor" aria-hidden="true" /> : null}
        </div>
      )}
      {asked ? <Asked asked={asked} /> : null}
      {ending ? (
        <p className="turn__ending" data-testid="turn-ending" data-stop-reason={stopReason}>
          {ending}
        </p>
      ) : null}
      {role === "assistant" && toolCalls.length > 0 ? (
        <p className="turn__tools" data-testid="turn-tools">
          Tools used: {toolCalls.join(", ")}
        </p>
      ) : null}
      {role === "assistant" && !streaming ? <TurnDetail turn={turn} /> : null}
      <div className="turn__actions">
        {role === "user" && !editing && refused === null ? (
          <button type="button" className="link-button" data-testid="edit" disabled={!actions.enabled} onClick={() => setEditing(true)}>
            Edit
          </button>
        ) : null}
        {role === "assistant" && last && !streaming ? (
          <button type="button" className="link-button" data-testid="regenerate" disabled={!actions.enabled} onClick={actions.onRegenerate}>
            Regenerate
          </button>
        ) : null}
      </div>
    </article>
  );
}

/** ‹ 1/2 ›: which alternative of this exchange is shown (an edited message, a regenerated reply). */
function BranchSwitch({ turn, actions }: { turn: AgentTurn; actions: TurnActions }) {
  const { id, siblings, siblingIndex } = turn;
  return (
    <nav className="branch" aria-label="Alternatives">
      <button
        type="button"
        className="icon-button"
        data-testid="branch-prev"
        aria-label="Previous alternative"
        disabled={!actions.enabled || siblingIndex === 0}
        onClick={() => actions.onBranch(id, siblingIndex - 1)}
      >
        ‹
      </button>
      <span className="branch__position" data-testid="branch-position">
        {siblingIndex + 1}/{siblings}
      </span>
      <button
        type="button"
        className="icon-button"
        data-testid="branch-next"
        aria-label="Next alternative"
        disabled={!actions.enabled || siblingIndex >= siblings - 1}
        onClick={() => actions.onBranch(id, siblingIndex + 1)}
      >
        ›
      </button>
    </nav>
  );
}

/** What a reply asked the user, and what came of it: answered, waiting, or stopped unanswered. */
function Asked({ asked }: { asked: NonNullable<AgentTurn["asked"]> }) {
  const { request, status, decision } = asked;
  const outcome =
    status === "answered"
      ? `answered “${answerText(decision, request.options !== null)}”`
      : status === "waiting"
        ? "waiting for your answer below"
        : "stopped before it was answered";
  return (
    <p className="turn__asked" data-testid="turn-asked" data-status={status}>
      Asked: {request.prompt} — {outcome}
    </p>
  );
}

/** An answer as the user gave it: an option as its button said it, free text as typed. */
function answerText(decision: unknown, option: boolean): string {
  if (typeof decision !== "string") return JSON.stringify(decision);
  return option ? decision.charAt(0).toUpperCase() + decision.slice(1) : decision;
}

/** What a finished reply showed while it streamed — its thinking and its tools — and when it ran. */
function TurnDetail({ turn }: { turn: AgentTurn }) {
  const { thinking, activity, meta } = turn;
  const seconds = meta.startedAt !== null && meta.finishedAt !== null ? meta.finishedAt - meta.startedAt : null;
  if (!thinking && activity.length === 0 && seconds === null && !meta.model) return null;
  return (
    <details className="turn__detail" data-testid="turn-detail">
      <summary>Details</summary>
      {thinking ? (
        <p className="turn__thinking" data-testid="turn-thinking" dir="auto">
          {shownText(thinking)}
        </p>
      ) : null}
      {activity.length > 0 ? (
        <ul className="turn__activity" data-testid="turn-activity">
          {activity.map((item) => (
            <li key={item.callId} data-testid="turn-activity-item" data-state={item.state}>
              🔧 {item.name} — {STATE_LABEL[item.state]}
            </li>
          ))}
        </ul>
      ) : null}
      <p className="turn__meta" data-testid="turn-meta">
        {seconds !== null ? `${seconds.toFixed(1)} s` : null}
        {meta.model ? ` · ${meta.model}` : null}
        {meta.usage ? ` · ${meta.usage.inputTokens} → ${meta.usage.outputTokens} tokens` : null}
      </p>
    </details>
  );
}

/** Enter sends (Shift+Enter for a new line), as the composer does; Escape cancels, as a rename does. */
function EditForm({ initial, onSave, onCancel }: { initial: string; onSave: (text: string) => void; onCancel: () => void }) {
  const [draft, setDraft] = useState(initial);
  const blank = draft.trim().length === 0;
  const save = () => {
    if (!blank) onSave(draft.trim());
  };
  const handleSubmit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    save();
  };
  const handleKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.nativeEvent.isComposing) return;
    if (event.key === "Escape") {
      event.preventDefault();
      onCancel();
    } else if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      save();
    }
  };
  return (
    <form className="turn__edit" onSubmit={handleSubmit}>
      <textarea
        className="composer__input"
        data-testid="edit-input"
        aria-label="Edit message"
        rows={2}
        autoFocus
        value={draft}
        onChange={(event) => setDraft(event.target.value)}
        onKeyDown={handleKeyDown}
      />
      <div className="turn__edit-buttons">
        <button type="submit" className="button button--primary" data-testid="edit-save" disabled={blank}>
          Send
        </button>
        <button type="button" className="button button--secondary" data-testid="edit-cancel" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
