import { useState } from "react";
import { useAgent } from "@thinwire/react";

/**
 * "Show earlier messages", above the turns while the conversation has pages
 * not loaded yet. A failure leaves the chat as it was; the button says so and
 * can be tried again.
 */
export function LoadEarlier() {
  const { hasEarlier, loadEarlier } = useAgent();
  const [loading, setLoading] = useState(false);
  const [failed, setFailed] = useState(false);
  if (!hasEarlier) return null;
  const onClick = () => {
    setLoading(true);
    loadEarlier()
      .then(() => setFailed(false), () => setFailed(true))
      .finally(() => setLoading(false));
  };
  return (
    <button
      type="button"
      className="button button--secondary load-earlier"
      data-testid="load-earlier"
      disabled={loading}
      onClick={onClick}
    >
      {loading ? "Loading…" : failed ? "Could not load earlier messages — try again" : "Show earlier messages"}
    </button>
  );
}
