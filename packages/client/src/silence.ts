/**
 * The watch on a quiet stream. The server breaks every silence of a stream
 * with a heartbeat, after the seconds its `Thinwire-Heartbeat` header names
 * (a WebSocket, which has no such header, after the default at most); a stream
 * silent for twice that is taken as broken. A connection can stay
 * open with nothing coming through it — a proxy that keeps a stream of a
 * server that died open (Vite's dev server does) — and only a timer ends it.
 */
import { ThinwireError } from "./errors.js";

/** Seconds between heartbeats when the server does not say: its default. */
export const DEFAULT_HEARTBEAT_SECONDS = 15;

/** How many heartbeat intervals of silence a stream is given: a late beat is no broken stream. */
const MARGIN = 2;

/**
 * Milliseconds a stream may stay silent, from its `Thinwire-Heartbeat`
 * header: 0 for none ("0": the server sends no heartbeats), the default
 * interval's for a header missing or not a number (an older server, a proxy
 * that drops it).
 */
export function silenceLimitMs(header: string | null): number {
  const seconds = header === null || header.trim() === "" ? Number.NaN : Number(header);
  const interval = Number.isFinite(seconds) && seconds >= 0 ? seconds : DEFAULT_HEARTBEAT_SECONDS;
  return interval * 1000 * MARGIN;
}

/**
 * Calls `onSilence` once `limitMs` pass without `heard()`. One timer per
 * limit, not one per chunk: `heard()` only notes the time.
 */
export class SilenceWatch {
  fired = false;
  readonly #limitMs: number;
  readonly #onSilence: () => void;
  #heardAt = Date.now();
  #timer: ReturnType<typeof setTimeout>;

  constructor(limitMs: number, onSilence: () => void) {
    this.#limitMs = limitMs;
    this.#onSilence = onSilence;
    this.#timer = setTimeout(() => this.#check(), limitMs);
  }

  heard(): void {
    this.#heardAt = Date.now();
  }

  stop(): void {
    clearTimeout(this.#timer);
  }

  #check(): void {
    const quiet = Date.now() - this.#heardAt;
    if (quiet < this.#limitMs) {
      this.#timer = setTimeout(() => this.#check(), this.#limitMs - quiet);
      return;
    }
    this.fired = true;
    this.#onSilence();
  }
}

/** What a stream silent past its limit fails with: a dropped connection, attached to again. */
export function silentStream(limitMs: number): ThinwireError {
  return new ThinwireError(
    "network_error",
    `Nothing came through the stream for ${limitMs / 1000} s, not even a heartbeat: the connection is taken as broken.`,
    { retryable: true },
  );
}
