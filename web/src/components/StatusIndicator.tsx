import type { AgentStatus } from "../agent-types";

export function StatusIndicator({ status }: { status: AgentStatus }) {
  return (
    <p className="status" role="status" aria-live="polite">
      <span className="status__label">Status:</span>{" "}
      <span className={`status__value status__value--${status}`} data-testid="status">
        {status}
      </span>
    </p>
  );
}
