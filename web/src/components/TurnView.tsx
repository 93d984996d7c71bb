import type { AgentTurn } from "../agent-types";

export function TurnView({ turn }: { turn: AgentTurn }) {
  const { role, text, toolCalls, streaming } = turn;
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
      {role === "assistant" && toolCalls.length > 0 ? (
        <p className="turn__tools" data-testid="turn-tools">
          Tools used: {toolCalls.join(", ")}
        </p>
      ) : null}
    </article>
  );
}
