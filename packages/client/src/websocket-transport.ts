/**
 * The WebSocket transport: one socket per transport instance, opened on first
 * use and reopened on the next use after it closed. Requests become commands
 * (`send`, `attach`, `decide`, `stop`); the frames of every run the socket
 * follows arrive interleaved and are routed to the request that asked for them
 * by `contextId` (and `runId` once known). A `decide` is answered by a new run
 * of a known context: its route takes the next `run_start` of that context.
 *
 * A `send` for a new conversation does not know its context id until the
 * run's `run_start`; the next `run_start` of a run no request is following is
 * taken to be its answer. Two such sends could not be told apart, so they are
 * serialized: the second is sent once the first learnt its context.
 *
 * Browsers cannot put headers on a WebSocket: the cookies of the page
 * authenticate it, and the protocol version travels as the subprotocol.
 */
import { ThinwireError, toThinwireError } from "./errors.js";
import type { Command, Frame, RejectedFrame } from "./generated/wire.js";
import {
  agentUrl,
  type RunFrame,
  type Transport,
  type TransportAttachRequest,
  type TransportDecideRequest,
  type TransportRunRequest,
  type TransportStopRequest,
  type TransportTarget,
} from "./transport.js";

export const WEBSOCKET_SUBPROTOCOL = "thinwire.v1";

export interface WebSocketTransportOptions {
  /** The WebSocket class; defaults to the global one. Tests inject a fake. */
  WebSocket?: typeof WebSocket;
  /**
   * The socket URL; defaults to `{baseUrl}/agents/{agent}/ws` with the scheme
   * made `ws:`/`wss:`, a relative `baseUrl` resolved against the page location.
   */
  url?: string | ((target: { baseUrl: string; agent: string }) => string);
}

const OPEN = 1;
const CLOSING = 2;

export class WebSocketTransport implements Transport {
  readonly #options: WebSocketTransportOptions;
  #connection: Connection | null = null;
  /** Settles when the pending send for a new conversation learnt its context id. */
  #newContext: Promise<void> = Promise.resolve();

  constructor(options: WebSocketTransportOptions = {}) {
    this.#options = options;
  }

  async *run({ body, signal, ...target }: TransportRunRequest): AsyncGenerator<Frame> {
    const contextId = body.contextId ?? null;
    const command: Command = { type: "send", message: body.message };
    if (contextId !== null) command.contextId = contextId;
    if (contextId !== null) {
      yield* this.#follow(target, new Route("send", contextId), command, signal);
      return;
    }
    const previous = this.#newContext;
    let release!: () => void;
    this.#newContext = new Promise<void>((resolve) => (release = resolve));
    try {
      await untilAborted(previous, signal);
      yield* this.#follow(target, new Route("send", null, release), command, signal);
    } finally {
      release();
    }
  }

  async *attach({ contextId, after, signal, ...target }: TransportAttachRequest): AsyncGenerator<Frame> {
    yield* this.#follow(target, new Route("attach", contextId), { type: "attach", contextId, after }, signal);
  }

  async *decide({ contextId, interruptId, value, signal, ...target }: TransportDecideRequest): AsyncGenerator<Frame> {
    const command: Command = { type: "decide", contextId, interruptId, value };
    yield* this.#follow(target, new Route("decide", contextId), command, signal);
  }

  async stop({ contextId, signal, ...target }: TransportStopRequest): Promise<void> {
    const connection = await this.#connect(target, signal);
    connection.send({ type: "stop", contextId });
  }

  /** Closes the socket; a later request opens a new one. */
  close(): void {
    this.#connection?.close();
    this.#connection = null;
  }

  async *#follow(
    target: Omit<TransportTarget, "headers">,
    route: Route,
    command: Command,
    signal: AbortSignal,
  ): AsyncGenerator<RunFrame> {
    const connection = await this.#connect(target, signal);
    connection.routes.add(route);
    if (route.contextId !== null) connection.contexts.add(route.contextId);
    try {
      connection.send(command);
      for (;;) {
        const frame = await untilAborted(route.next(), signal);
        if (frame === null) return;
        yield frame;
      }
    } finally {
      connection.routes.delete(route);
      route.release();
    }
  }

  async #connect(target: Omit<TransportTarget, "headers">, signal?: AbortSignal): Promise<Connection> {
    if (signal?.aborted) throw aborted();
    let connection = this.#connection;
    if (!connection || connection.closed) {
      const Socket = this.#options.WebSocket ?? globalThis.WebSocket;
      if (!Socket) throw new ThinwireError("network_error", "This environment has no WebSocket.");
      const url = this.#url(target);
      let socket: WebSocket;
      try {
        socket = new Socket(url, [WEBSOCKET_SUBPROTOCOL]);
      } catch (error) {
        throw toThinwireError(error);
      }
      connection = new Connection(socket);
      this.#connection = connection;
    }
    await untilAborted(connection.opened, signal);
    return connection;
  }

  #url(target: { baseUrl: string; agent: string }): string {
    const option = this.#options.url;
    if (typeof option === "function") return option(target);
    if (typeof option === "string") return option;
    return webSocketUrl(agentUrl(target, "/ws"));
  }
}

/** Makes an http(s) or relative URL a ws(s) one, relative ones resolved against the page. */
export function webSocketUrl(url: string): string {
  const location = (globalThis as { location?: { href: string } }).location;
  let resolved: URL;
  try {
    resolved = location ? new URL(url, location.href) : new URL(url);
  } catch (error) {
    throw new ThinwireError(
      "invalid_url",
      `Cannot build a WebSocket URL from ${JSON.stringify(url)}: give an absolute baseUrl or the url option.`,
      { cause: error },
    );
  }
  if (resolved.protocol === "http:") resolved.protocol = "ws:";
  else if (resolved.protocol === "https:") resolved.protocol = "wss:";
  return resolved.href;
}

/** One open socket and the requests it serves. */
class Connection {
  readonly routes = new Set<Route>();
  /** Contexts this socket has followed: a run_start of one of them cannot answer a new conversation's send. */
  readonly contexts = new Set<string>();
  readonly opened: Promise<void>;
  closed: ThinwireError | null = null;
  readonly #socket: WebSocket;

  constructor(socket: WebSocket) {
    this.#socket = socket;
    this.opened = new Promise<void>((resolve, reject) => {
      socket.onopen = () => resolve();
      socket.onclose = (event: CloseEvent) => {
        const error = closeError(event.code, event.reason);
        this.closed = error;
        reject(error);
        for (const route of this.routes) route.fail(error);
        this.routes.clear();
      };
    });
    this.opened.catch(() => undefined);
    socket.onerror = () => undefined; // a close event follows and carries the outcome
    socket.onmessage = (event: MessageEvent) => {
      if (typeof event.data === "string") this.#receive(event.data);
    };
  }

  send(command: Command): void {
    if (this.closed) throw this.closed;
    if (this.#socket.readyState !== OPEN) throw closeError(1006, "");
    this.#socket.send(JSON.stringify(command));
  }

  close(): void {
    if (this.#socket.readyState < CLOSING) this.#socket.close(1000);
  }

  #receive(data: string): void {
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      return; // tolerant receiver: not a frame
    }
    if (typeof value !== "object" || value === null) return;
    const frame = value as Frame;
    if (frame.type === "rejected") {
      this.#reject(frame);
      return;
    }
    if (typeof frame.contextId !== "string") return;
    let taken = false;
    for (const route of this.routes) taken = route.offer(frame) || taken;
    if (taken || frame.type !== "run_start" || this.contexts.has(frame.contextId)) return;
    for (const route of this.routes) {
      if (route.contextId === null) {
        this.contexts.add(frame.contextId);
        route.bind(frame);
        return;
      }
    }
  }

  #reject(frame: RejectedFrame): void {
    const contextId = frame.contextId ?? null;
    const matches = [...this.routes].filter(
      (route) => (frame.command == null || route.kind === frame.command) && route.contextId === contextId,
    );
    // The refusal answers a command not yet under way: prefer a route that has no run yet.
    const route = matches.find((candidate) => candidate.runId === null) ?? matches[0];
    if (!route) return;
    if (frame.code === "no_run" && route.kind === "attach") route.end();
    else {
      // A `rejected` has no interruptId today; take one if a server sends it.
      const interruptId = (frame as { interruptId?: unknown }).interruptId;
      route.fail(
        new ThinwireError(frame.code, frame.message, {
          retryable: frame.code === "context_busy",
          ...(typeof interruptId === "string" ? { interruptId } : {}),
        }),
      );
    }
  }
}

/** The frames one request is waiting for, queued until it reads them. */
class Route {
  runId: string | null = null;
  #items: Array<RunFrame | null | { error: ThinwireError }> = [];
  #wake: (() => void) | null = null;
  #finished = false;

  constructor(
    readonly kind: "send" | "attach" | "decide",
    public contextId: string | null,
    readonly release: () => void = () => undefined,
  ) {}

  /** Takes the frame if it belongs to this request's run. */
  offer(frame: RunFrame): boolean {
    if (this.#finished || this.contextId === null || frame.contextId !== this.contextId) return false;
    if (this.runId === null) {
      // A send or a decision answers with a new run; an attach follows whichever run the server has.
      if (this.kind !== "attach" && frame.type !== "run_start") return false;
      this.runId = frame.runId;
    } else if (frame.runId !== this.runId) {
      return false;
    }
    this.#put(frame);
    if (frame.type === "done") this.end();
    return true;
  }

  /** A new conversation's send learns its context from its run_start. */
  bind(frame: RunFrame): void {
    this.contextId = frame.contextId;
    this.runId = frame.runId;
    this.release();
    this.#put(frame);
  }

  end(): void {
    this.#put(null);
    this.#finished = true;
  }

  fail(error: ThinwireError): void {
    this.#put({ error });
    this.#finished = true;
  }

  async next(): Promise<RunFrame | null> {
    while (this.#items.length === 0) await new Promise<void>((resolve) => (this.#wake = resolve));
    const item = this.#items.shift()!;
    if (item !== null && "error" in item) throw item.error;
    return item;
  }

  #put(item: RunFrame | null | { error: ThinwireError }): void {
    if (this.#finished) return;
    this.#items.push(item);
    const wake = this.#wake;
    this.#wake = null;
    wake?.();
  }
}

function closeError(code: number, reason: string): ThinwireError {
  const detail = reason ? `: ${reason}` : "";
  switch (code) {
    case 4401:
      return new ThinwireError("unauthenticated", `The server refused the connection${detail}.`);
    case 1002:
      return new ThinwireError("protocol_mismatch", `The server speaks another thinwire protocol${detail}.`);
    case 1003:
    case 1007:
      return new ThinwireError("protocol_error", `The server could not read a message${detail}.`);
    case 1009:
      return new ThinwireError("message_too_large", `The message is too large${detail}.`);
    default:
      return new ThinwireError("network_error", `The connection closed (code ${code})${detail}.`, { retryable: true });
  }
}

function aborted(): ThinwireError {
  return new ThinwireError("aborted", "The request was cancelled.");
}

/** Waits for the promise, or rejects with `aborted` as soon as the signal fires. */
function untilAborted<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(aborted());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(aborted());
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
