/**
 * The one error type of the client.
 *
 * `code` is stable and machine-readable: the server's wire error codes
 * (`context_busy`, `context_not_found`, `invalid_request`, ...) pass through
 * unchanged, and the client adds its own for failures it detects itself:
 *
 * - `network_error`       the request or the stream failed below HTTP (retryable)
 * - `stream_interrupted`  the stream ended before its `done` frame (retryable)
 * - `aborted`             `reset()` or `dispose()` cancelled the work
 * - `disposed`            the client was used after `dispose()`
 * - `protocol_mismatch`   the server speaks another protocol version
 * - `protocol_error`      the server sent something that is not a frame
 * - `http_error`          a non-2xx response without a typed error body
 * - `invalid_url`         no WebSocket URL can be built from the options
 * - `no_pending_interrupt` `decide()` was called with no decision pending
 *
 * `decision_pending` (a send while the conversation waits for a decision,
 * refused locally or by the server) carries the interrupt to answer first in
 * `interruptId`.
 */
export class ThinwireError extends Error {
  override readonly name = "ThinwireError";
  readonly code: string;
  readonly status?: number;
  readonly retryable: boolean;
  /** With `decision_pending`: the interrupt to answer first, when known. */
  readonly interruptId?: string;

  constructor(
    code: string,
    message: string,
    options: { status?: number; retryable?: boolean; cause?: unknown; interruptId?: string } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    if (options.status !== undefined) this.status = options.status;
    this.retryable = options.retryable ?? false;
    if (options.interruptId !== undefined) this.interruptId = options.interruptId;
  }
}

/** Maps whatever `fetch` or a body read threw to a ThinwireError. */
export function toThinwireError(error: unknown, signal?: AbortSignal): ThinwireError {
  if (error instanceof ThinwireError) return error;
  if (signal?.aborted || (error instanceof Error && error.name === "AbortError")) {
    return new ThinwireError("aborted", "The request was cancelled.", { cause: error });
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new ThinwireError("network_error", `Network failure: ${detail}`, {
    retryable: true,
    cause: error,
  });
}

// The client's own refusals, shared by the AgentClient modules (not exported by the package).

export function aborted(cause?: unknown): ThinwireError {
  return new ThinwireError("aborted", "The request was cancelled.", cause === undefined ? {} : { cause });
}

export function busy(): ThinwireError {
  return new ThinwireError("context_busy", "A message is already being answered.", { retryable: true });
}

export function disposed(): ThinwireError {
  return new ThinwireError("disposed", "This client has been disposed.");
}

export function decisionPending(interruptId: string): ThinwireError {
  return new ThinwireError("decision_pending", "Answer the pending decision first.", { interruptId });
}

/** The same error, naming the interrupt it is about. */
export function withInterruptId(error: ThinwireError, interruptId: string): ThinwireError {
  return new ThinwireError(error.code, error.message, {
    ...(error.status === undefined ? {} : { status: error.status }),
    retryable: error.retryable,
    cause: error,
    interruptId,
  });
}
