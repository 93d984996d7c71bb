import { useEffect, useRef } from "react";
import type { AgentTurn } from "../agent-types";
import { TurnView, type TurnActions } from "./TurnView";

interface MessageListProps {
  turns: readonly AgentTurn[];
  busy: boolean;
  /** A decision is pending: the last reply is the one waiting for it. */
  awaitingDecision: boolean;
  actions: TurnActions;
}

export function MessageList({ turns, busy, awaitingDecision, actions }: MessageListProps) {
  const endRef = useRef<HTMLDivElement>(null);
  const last = turns[turns.length - 1];
  const lastReply = [...turns].reverse().find((turn) => turn.role === "assistant");

  // Keep the newest text in view while a reply streams in; earlier pages added above leave the scroll alone.
  useEffect(() => {
    endRef.current?.scrollIntoView({ block: "end" });
  }, [last?.id, last?.text]);

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
        turns.map((turn) => (
          <TurnView
            key={turn.id}
            turn={turn}
            awaitingDecision={awaitingDecision && turn === last}
            last={turn === lastReply}
            actions={actions}
          />
        ))
      )}
      <div ref={endRef} />
    </section>
  );
}
