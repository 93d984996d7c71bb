import type { AgentTurn } from "../agent-types";
import { TurnView, type TurnActions } from "./TurnView";

interface MessageListProps {
  turns: readonly AgentTurn[];
  busy: boolean;
  actions: TurnActions;
}

/** The turns; the page keeps the newest in view (`useFollowBottom`). */
export function MessageList({ turns, busy, actions }: MessageListProps) {
  const lastReply = [...turns].reverse().find((turn) => turn.role === "assistant");
  return (
    <section
      className="messages"
      role="log"
      aria-label="Conversation"
      aria-live="polite"
      aria-busy={busy}
    >
      {turns.length === 0 ? (
        <p className="messages__empty">No messages yet. Say hello to start a conversation.</p>
      ) : (
        // Turn ids are the server's: the same while a reply streams and after a reload.
        turns.map((turn) => <TurnView key={turn.id} turn={turn} last={turn === lastReply} actions={actions} />)
      )}
    </section>
  );
}
