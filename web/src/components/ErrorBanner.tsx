import type { AgentError } from "../agent-types";

export function ErrorBanner({ error }: { error: AgentError }) {
  return (
    <div className="error" role="alert" data-testid="error">
      <strong className="error__code">{error.code}</strong>
      <span className="error__message">{error.message}</span>
      {error.retryable ? <span className="error__hint">You can try again.</span> : null}
    </div>
  );
}
