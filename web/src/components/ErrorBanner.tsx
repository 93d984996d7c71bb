import { useAgent } from "@thinwire/react";
import { ErrorMessage } from "./ErrorMessage";

/**
 * The conversation's last failure, until it is dismissed or the next message is sent.
 * `onDismissed`: the banner goes, and the focus with it unless it is put elsewhere.
 */
export function ErrorBanner({ onDismissed }: { onDismissed: () => void }) {
  const { error, clearError } = useAgent();
  if (!error) return null;
  return (
    <div className="error" role="alert" data-testid="error" data-code={error.code}>
      <p className="error__body">
        <ErrorMessage error={error} />
      </p>
      <button
        type="button"
        className="error__dismiss"
        data-testid="dismiss-error"
        aria-label="Dismiss"
        onClick={() => {
          clearError();
          onDismissed();
        }}
      >
        ×
      </button>
    </div>
  );
}
