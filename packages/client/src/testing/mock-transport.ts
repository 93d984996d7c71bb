/**
 * The trivial Transport: frames come from functions instead of a server.
 * For tests, stories and demos; it records every request it was given, and
 * whether it was closed.
 *
 * ```ts
 * import { MockTransport } from "@thinwire/client/testing";
 *
 * const transport = new MockTransport(() => [runStart, token, done], {
 *   attach: ({ after }) => remainingFramesAfter(after), // default: nothing to follow
 *   decide: ({ value }) => continuedRun(value), // default: interrupt_not_found
 *   regenerate: () => anotherReply(), // default: nothing_to_regenerate
 *   edit: ({ body }) => replyTo(body.message.text), // default: turn_not_found
 * });
 * ```
 */
import { ThinwireError } from "../errors.js";
import type { ErrorCode, Frame, StopResult } from "../generated/wire.js";
import type {
  Transport,
  TransportAttachRequest,
  TransportDecideRequest,
  TransportEditRequest,
  TransportRegenerateRequest,
  TransportRunRequest,
  TransportStopRequest,
} from "../transport.js";

type Frames = Iterable<Frame> | AsyncIterable<Frame>;
export type MockRunHandler = (request: TransportRunRequest) => Frames;
export type MockAttachHandler = (request: TransportAttachRequest) => Frames;
export type MockDecideHandler = (request: TransportDecideRequest) => Frames;
export type MockRegenerateHandler = (request: TransportRegenerateRequest) => Frames;
export type MockEditHandler = (request: TransportEditRequest) => Frames;
/** Returns the server's answer, if any: `stopping` false says no run was going on. */
export type MockStopHandler = (request: TransportStopRequest) => StopResult | void | Promise<StopResult | void>;

export interface MockTransportHandlers {
  /** Defaults to no frames: the HTTP 204 of a context with nothing to follow. */
  attach?: MockAttachHandler;
  /** Defaults to refusing with `interrupt_not_found`, as a server with nothing pending does. */
  decide?: MockDecideHandler;
  /** Defaults to refusing with `nothing_to_regenerate`. */
  regenerate?: MockRegenerateHandler;
  /** Defaults to refusing with `turn_not_found`. */
  edit?: MockEditHandler;
  /** Defaults to accepting the stop and doing nothing else. */
  stop?: MockStopHandler;
}

export class MockTransport implements Transport {
  /** The run requests, in order. */
  readonly requests: TransportRunRequest[] = [];
  readonly attaches: TransportAttachRequest[] = [];
  readonly decisions: TransportDecideRequest[] = [];
  readonly regenerations: TransportRegenerateRequest[] = [];
  readonly edits: TransportEditRequest[] = [];
  readonly stops: TransportStopRequest[] = [];
  /** `close()` was called: by the caller that owns the transport, never by a client it was given to. */
  closed = false;
  readonly #run: MockRunHandler;
  readonly #attach: MockAttachHandler;
  readonly #decide: MockDecideHandler;
  readonly #regenerate: MockRegenerateHandler;
  readonly #edit: MockEditHandler;
  readonly #stop: MockStopHandler;

  constructor(run: MockRunHandler, handlers: MockTransportHandlers = {}) {
    this.#run = run;
    this.#attach = handlers.attach ?? (() => []);
    this.#decide = handlers.decide ?? notFound;
    this.#regenerate = handlers.regenerate ?? (() => refuse("nothing_to_regenerate", 409, "There is no reply to regenerate."));
    this.#edit = handlers.edit ?? (({ body }) => refuse("turn_not_found", 404, `No turn ${body.turnId}.`));
    this.#stop = handlers.stop ?? (() => undefined);
  }

  run(request: TransportRunRequest): AsyncGenerator<Frame> {
    this.requests.push(request);
    return follow(() => this.#run(request), request.signal);
  }

  attach(request: TransportAttachRequest): AsyncGenerator<Frame> {
    this.attaches.push(request);
    return follow(() => this.#attach(request), request.signal);
  }

  decide(request: TransportDecideRequest): AsyncGenerator<Frame> {
    this.decisions.push(request);
    return follow(() => this.#decide(request), request.signal);
  }

  regenerate(request: TransportRegenerateRequest): AsyncGenerator<Frame> {
    this.regenerations.push(request);
    return follow(() => this.#regenerate(request), request.signal);
  }

  edit(request: TransportEditRequest): AsyncGenerator<Frame> {
    this.edits.push(request);
    return follow(() => this.#edit(request), request.signal);
  }

  async stop(request: TransportStopRequest): Promise<StopResult | void> {
    this.stops.push(request);
    return await this.#stop(request);
  }

  close(): void {
    this.closed = true;
  }
}

function notFound({ interruptId }: TransportDecideRequest): never {
  return refuse("interrupt_not_found", 404, `No pending interrupt ${interruptId}.`);
}

function refuse(code: ErrorCode, status: number, message: string): never {
  throw new ThinwireError(code, message, { status });
}

async function* follow(frames: () => Frames, signal: AbortSignal): AsyncGenerator<Frame> {
  for await (const frame of frames()) {
    if (signal.aborted) throw new ThinwireError("aborted", "The request was cancelled.");
    yield frame;
  }
}
