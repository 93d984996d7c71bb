/** When and how often a broken stream is attached to again. */
import type { ThinwireError } from "./errors.js";

export interface ReconnectOptions {
  /** Attaches tried in a row without progress before giving up; default 8, 0 never reconnects. */
  attempts?: number;
  /** Wait before the first attach; doubles on each further one. Default 250. */
  baseDelayMs?: number;
  /** Upper bound of the wait. Default 5000. */
  maxDelayMs?: number;
}

export function reconnectLimits(options: ReconnectOptions = {}): Required<ReconnectOptions> {
  return {
    attempts: options.attempts ?? 8,
    baseDelayMs: options.baseDelayMs ?? 250,
    maxDelayMs: options.maxDelayMs ?? 5000,
  };
}

/** The wait before attach number `attempt` (from 0): exponential, capped. */
export function backoffDelay(attempt: number, limits: Required<ReconnectOptions>): number {
  return Math.min(limits.maxDelayMs, limits.baseDelayMs * 2 ** attempt);
}

/** Errors that say the connection broke, not that the server refused: the run may go on. */
export function isReconnectable(error: ThinwireError): boolean {
  if (!error.retryable) return false;
  return error.code === "network_error" || error.code === "stream_interrupted" || (error.status ?? 0) >= 500;
}
