/**
 * The one error type of the client, and the client's own refusals.
 *
 * `code` is stable and machine-readable: one of the generated `ErrorCode`s
 * (`ERROR_CODES` says what each means). The server's codes pass through
 * unchanged — a newer server may send one this client does not know, so the
 * field also admits any string — and the client raises its own
 * (`ClientErrorCode`: `network_error`, `stream_interrupted`, `aborted`, …)
 * for failures it detects itself. The constructor takes only known codes, so
 * a typo in the client is a type error; codes read off the wire go through
 * `serverError`.
 *
 * `decision_pending` (a send while the conversation waits for a decision,
 * refused locally or by the server) carries the interrupt to answer first in
 * `interruptId`.
 */
import type { ErrorCode } from "./generated/wire.js";
import type { AgentErrorInfo } from "./snapshot.js";

export interface ThinwireErrorOptions {
  /** The HTTP status of the refusal, when there was one. */
  status?: number | undefined;
  /** The same request may succeed when tried again later. */
  retryable?: boolean | undefined;
  cause?: unknown | undefined;
  /** With `decision_pending`: the interrupt to answer first. */
  interruptId?: string | undefined;
}

export class ThinwireError extends Error {
  override readonly name = "ThinwireError";
  /** One of `ErrorCode`, or a code of a newer server. */
  readonly code: ErrorCode | (string & {});
  /**
   * The HTTP status of a refusal over HTTP; undefined for the same refusal
   * over a WebSocket (a `rejected` frame carries none). Read `code`, the same on both.
   */
  readonly status?: number;
  readonly retryable: boolean;
  /** With `decision_pending`: the interrupt to answer first, when known. */
  readonly interruptId?: string;

  constructor(code: ErrorCode, message: string, options: ThinwireErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    if (options.status !== undefined) this.status = options.status;
    this.retryable = options.retryable ?? false;
    if (options.interruptId !== undefined) this.interruptId = options.interruptId;
  }
}

/** An error the server sent: its code is taken as is, known to this client or not. */
export function serverError(code: string, message: string, options: ThinwireErrorOptions = {}): ThinwireError {
  return new ThinwireError(code as ErrorCode, message, options);
}

/** Maps whatever `fetch` or a body read threw to a ThinwireError. */
export function toThinwireError(error: unknown, signal?: AbortSignal): ThinwireError {
  if (error instanceof ThinwireError) return error;
  if (signal?.aborted || (error instanceof Error && error.name === "AbortError")) return aborted(error);
  const detail = error instanceof Error ? error.message : String(error);
  return new ThinwireError("network_error", `Network failure: ${detail}`, { retryable: true, cause: error });
}

/** What the snapshot shows of an error. */
export function errorInfo(error: ThinwireError): AgentErrorInfo {
  return { code: error.code, message: error.message, retryable: error.retryable };
}

// The client's own refusals (not exported by the package).

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

export function nothingToRegenerate(): ThinwireError {
  return new ThinwireError("nothing_to_regenerate", "There is no reply to regenerate.");
}

export function turnNotFound(turnId: string): ThinwireError {
  return new ThinwireError("turn_not_found", `No turn ${JSON.stringify(turnId)} is shown in this conversation.`);
}

export function notAUserTurn(): ThinwireError {
  return new ThinwireError("not_a_user_turn", "Only a user's turn can be edited.");
}

export function branchNotFound(): ThinwireError {
  return new ThinwireError("branch_not_found", "There is no conversation to switch branches in.");
}

/**
 * An alternative the turn's exchange does not have, as the view counts them
 * (`turn.siblings`): the server's refusal, made without a request.
 */
export function noSuchAlternative(siblings: number): ThinwireError {
  return new ThinwireError(
    "branch_not_found",
    `That turn has ${siblings} alternative${siblings === 1 ? "" : "s"}: index 0${siblings === 1 ? "" : ` to ${siblings - 1}`}.`,
  );
}

export function invalidRequest(message: string): ThinwireError {
  return new ThinwireError("invalid_request", message);
}

/**
 * `url` resolved against the page (the worker's location in a worker), or as
 * it is where there is none (Node.js). One that cannot be resolved — relative
 * with no page — is `invalid_url`: a mistake of the setup, not a fault of the
 * network, so it is shown at once and never retried. `hint` says what to fix.
 */
export function resolveUrl(url: string, hint: string): URL {
  const page = (globalThis as { location?: { href?: unknown } }).location?.href;
  try {
    return typeof page === "string" ? new URL(url, page) : new URL(url);
  } catch (error) {
    throw new ThinwireError("invalid_url", `Cannot resolve the URL ${JSON.stringify(url)}: ${hint}`, { cause: error });
  }
}

/** The same error, naming the interrupt it is about. */
export function withInterruptId(error: ThinwireError, interruptId: string): ThinwireError {
  return serverError(error.code, error.message, {
    ...(error.status === undefined ? {} : { status: error.status }),
    retryable: error.retryable,
    cause: error,
    interruptId,
  });
}
