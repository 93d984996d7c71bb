import { describeError, type ShownError } from "../error-text";

/**
 * A failure in words for the user — and the server's reference, which support asks
 * for — with the wire code after it, small, for developers.
 */
export function ErrorMessage({ error }: { error: ShownError }) {
  const { text, reference } = describeError(error);
  return (
    <>
      <span className="error-message__text" data-testid="error-text">
        {text}
      </span>
      {reference ? (
        <span className="error-message__reference" data-testid="error-reference">
          Reference: {reference}
        </span>
      ) : null}
      <code className="error-message__code" data-testid="error-code" title="Error code, for developers">
        {error.code}
      </code>
    </>
  );
}
