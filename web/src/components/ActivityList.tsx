import type { AgentActivity } from "../agent-types";

const STATE_LABEL: Record<AgentActivity["state"], string> = {
  running: "running",
  ok: "done",
  error: "failed",
};

export function ActivityList({ items }: { items: readonly AgentActivity[] }) {
  if (items.length === 0) return null;
  return (
    <ul className="activity" data-testid="activity" aria-label="Tool activity">
      {items.map((item) => (
        <li
          key={item.callId}
          className={`activity__item activity__item--${item.state}`}
          data-testid="activity-item"
          data-state={item.state}
        >
          <span aria-hidden="true">🔧</span> {item.name} — {STATE_LABEL[item.state] ?? item.state}
        </li>
      ))}
    </ul>
  );
}
