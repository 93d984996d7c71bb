/**
 * When and how often a request is tried again: a broken stream is attached to
 * again, and a send whose response never started is repeated with its
 * `messageId` (which makes the repeat safe: the server streams the run the
 * first try started, if it got that far, instead of starting a second one).
 * A transcript that failed to load is loaded again: a GET is safe to repeat.
 */
import { aborted, type ThinwireError } from "./errors.js";

export interface ReconnectOptions {
  /**
   * Tries in a row without progress before giving up — attaches to a broken
   * stream, repeats of a send that got no answer, or of a transcript's load;
   * default 8, 0 never retries.
   */
  attempts?: number | undefined;
  /** Wait before the first try; doubles on each further one. Default 250. */
  baseDelayMs?: number | undefined;
  /** Upper bound of the wait. Default 5000. */
  maxDelayMs?: number | undefined;
}

export function reconnectLimits(options: ReconnectOptions = {}): Required<ReconnectOptions> {
  return {
    attempts: options.attempts ?? 8,
    baseDelayMs: options.baseDelayMs ?? 250,
    maxDelayMs: options.maxDelayMs ?? 5000,
  };
}

/** The wait before try number `attempt` (from 0): exponential, capped. */
export function backoffDelay(attempt: number, limits: Required<ReconnectOptions>): number {
  return Math.min(limits.maxDelayMs, limits.baseDelayMs * 2 ** attempt);
}

/** Waits `ms`, or rejects with `aborted` as soon as `signal` fires. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(aborted());
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/** Errors that say the connection broke, not that the server refused: the run may go on. */
export function isReconnectable(error: ThinwireError): boolean {
  if (!error.retryable) return false;
  return error.code === "network_error" || error.code === "stream_interrupted" || (error.status ?? 0) >= 500;
}

/** Retryable refusals that are the server's real answer to a send: shown, not repeated. */
const ANSWERS: ReadonlySet<string> = new Set(["context_busy", "rate_limited", "too_many_runs", "too_many_streams"]);

/** The server failed (HTTP 500/503); a WebSocket reports these by code alone, without a status. */
const SERVER_FAILURES: ReadonlySet<string> = new Set(["internal_error", "store_unavailable"]);

/**
 * Whether a failure before any frame of a send's run leaves open that the
 * server took the send: the connection failed or the stream ended without a
 * frame, the server failed (5xx), or it said to try again — except the
 * refusals in `ANSWERS`. A typed 4xx refusal is an answer, never repeated.
 */
export function mayBeUnanswered(error: ThinwireError): boolean {
  if (error.code === "network_error" || error.code === "stream_interrupted") return true;
  if (ANSWERS.has(error.code)) return false;
  const status = error.status ?? 0;
  if (status >= 500 || SERVER_FAILURES.has(error.code)) return true;
  if (status >= 400) return false;
  return error.retryable;
}

/**
 * Whether a request that is safe to repeat (a transcript's GET) may succeed
 * when tried again: the connection failed, the server failed (5xx), or it said
 * to try again (a 429, say). A typed 4xx refusal is the answer.
 */
export function isTransient(error: ThinwireError): boolean {
  if (error.code === "network_error" || SERVER_FAILURES.has(error.code)) return true;
  return (error.status ?? 0) >= 500 || error.retryable;
}
