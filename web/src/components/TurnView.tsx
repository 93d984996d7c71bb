import type { AgentTurn } from "../agent-types";

const ENDINGS: Partial<Record<NonNullable<AgentTurn["stopReason"]>, string>> = {
  interrupted: "This reply was interrupted.",
  stopped: "Stopped.",
  error: "This reply failed.",
};

interface TurnViewProps {
  turn: AgentTurn;
  /** This reply paused to ask the question that is still pending. */
  awaitingDecision?: boolean;
}

export function TurnView({ turn, awaitingDecision = false }: TurnViewProps) {
  const { role, text, toolCalls, streaming, stopReason } = turn;
  const ending =
    stopReason === "interrupted" && awaitingDecision
      ? "Waiting for a decision."
      : stopReason
        ? ENDINGS[stopReason]
        : undefined;
  const author = role === "user" ? "You" : "Assistant";
  return (
    <article
      className={`turn turn--${role}`}
      data-testid="turn"
      data-role={role}
      data-streaming={String(streaming)}
      aria-label={`Message from ${author.toLowerCase()}`}
    >
      <p className="turn__author">{author}</p>
      <div className="turn__text" data-testid="turn-text">
        {text}
        {streaming ? <span className="turn__cursor" aria-hidden="true" /> : null}
      </div>
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
    </article>
  );
}
