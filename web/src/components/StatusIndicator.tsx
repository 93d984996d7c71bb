import type { AgentStatus } from "../agent-types";

/** The hook's status; an idle conversation whose question waits says it waits for the user. */
export function StatusIndicator({ status, waiting }: { status: AgentStatus; waiting: boolean }) {
  const shown = status === "idle" && waiting ? "waiting" : status;
  return (
    <p className="status" role="status" aria-live="polite">
      <span className="status__label">Status:</span>{" "}
      <span className={`status__value status__value--${shown}`} data-testid="status" data-status={status}>
        {shown === "waiting" ? "waiting for your answer" : status}
      </span>
    </p>
  );
}
