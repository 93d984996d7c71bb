import { useAgent } from "@thinwire/react";

/** The question the agent waits on (here: may it issue a refund?), one button per answer. */
export function Approval() {
  const { interrupt, status, decide } = useAgent();
  if (!interrupt) return null;
  const busy = status === "streaming" || status === "reconnecting";
  return (
    <section aria-label="Approval">
      <p>{interrupt.prompt}</p>
      {interrupt.options?.map((option) => (
        <button key={option} disabled={busy} onClick={() => decide(option).catch(() => {})}>
          {option}
        </button>
      ))}
    </section>
  );
}
