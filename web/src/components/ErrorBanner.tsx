import { useAgent } from "@thinwire/react";

/** The conversation's last failure, until it is dismissed or the next message is sent. */
export function ErrorBanner() {
  const { error, clearError } = useAgent();
  if (!error) return null;
  return (
    <div className="error" role="alert" data-testid="error">
      <strong className="error__code">{error.code}</strong>
      <span className="error__message">{error.message}</span>
      {error.retryable ? <span className="error__hint">You can try again.</span> : null}
      <button type="button" className="error__dismiss" data-testid="dismiss-error" aria-label="Dismiss" onClick={clearError}>
        ×
      </button>
    </div>
  );
}
