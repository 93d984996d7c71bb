import type { Frame, RunRequest } from "./generated/wire.js";

/** One run request, as the client hands it to a transport. */
export interface TransportRunRequest {
  /** Absolute or relative URL of `POST /agents/{agent}/runs`. */
  url: string;
  body: RunRequest;
  /** Includes the protocol header. */
  headers: Record<string, string>;
  /** Aborted by `reset()` and `dispose()`; the transport must stop reading. */
  signal: AbortSignal;
}

/**
 * How frames get from the server to the client. SSE is one implementation; a
 * WebSocket transport or a fake in tests is another.
 *
 * Contract: `run` yields the frames of one run in order and returns when the
 * server ends the stream. It throws a `ThinwireError`: the server's typed error
 * for a non-2xx response (with `status`), `network_error` (retryable) when the
 * connection fails, `aborted` when the signal fires. Frames of unknown types may
 * be yielded; the client ignores them.
 */
export interface Transport {
  run(request: TransportRunRequest): AsyncIterable<Frame>;
}
