import { useAgent } from "@thinwire/react";
import { ErrorMessage } from "./ErrorMessage";

/** The conversation's last failure, until it is dismissed or the next message is sent. */
export function ErrorBanner() {
  const { error, clearError } = useAgent();
  if (!error) return null;
  return (
    <div className="error" role="alert" data-testid="error" data-code={error.code}>
      <p className="error__body">
        <ErrorMessage error={error} />
      </p>
      <button type="button" className="error__dismiss" data-testid="dismiss-error" aria-label="Dismiss" onClick={clearError}>
        ×
      </button>
    </div>
  );
}
