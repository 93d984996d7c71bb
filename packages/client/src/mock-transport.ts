/**
 * The trivial Transport: frames come from a function instead of a server.
 * For tests, stories and demos; it records every request it was given.
 */
import { ThinwireError } from "./errors.js";
import type { Frame } from "./generated/wire.js";
import type { Transport, TransportRunRequest } from "./transport.js";

export type MockRunHandler = (request: TransportRunRequest) => Iterable<Frame> | AsyncIterable<Frame>;

export class MockTransport implements Transport {
  readonly requests: TransportRunRequest[] = [];
  readonly #handler: MockRunHandler;

  constructor(handler: MockRunHandler) {
    this.#handler = handler;
  }

  async *run(request: TransportRunRequest): AsyncGenerator<Frame> {
    this.requests.push(request);
    for await (const frame of this.#handler(request)) {
      if (request.signal.aborted) throw new ThinwireError("aborted", "The request was cancelled.");
      yield frame;
    }
  }
}
