/**
 * One WebSocket and the requests it serves, told apart by `requestId`.
 *
 * Every command carries a `requestId` minted here (a random prefix per socket
 * and a counter). The server echoes it in the `run_start` of the run a `send`,
 * `decide`, `regenerate` or `edit` started — that binds the request's route to its context and
 * run — and in the `rejected` that refuses a command, which fails exactly that
 * route (`no_run` just ends an attach). Frames after `run_start` carry no
 * `requestId`: they go to every route following their context and run. An
 * attach follows whichever run of its context the server sends.
 *
 * A closed socket fails every route it served; the transport opens a new one
 * for the next request. While a route is open the socket is watched: the
 * server sends a heartbeat while a run it follows is quiet, at most
 * `DEFAULT_HEARTBEAT_SECONDS` apart, so a socket silent for twice that is taken
 * as broken (a half-open connection shows nothing else) — closed, its routes
 * failed with a retryable `network_error`, which reattaches on a new socket.
 */
import { serverError, ThinwireError } from "./errors.js";
import { CLOSE_CODES, type Command, ERROR_CODES, type Frame, RETRYABLE_CODES, type RejectedFrame } from "./generated/wire.js";
import { SilenceWatch, silenceLimitMs, silentStream } from "./silence.js";
import type { RunFrame } from "./transport.js";

const OPEN = 1;
const CLOSING = 2;

/** The requests that are answered by a stream of frames. */
export type RouteKind = "send" | "attach" | "decide" | "regenerate" | "edit";

export class Connection {
  readonly opened: Promise<void>;
  closed: ThinwireError | null = null;
  readonly #socket: WebSocket;
  readonly #routes = new Map<string, Route>();
  readonly #prefix = Math.random().toString(36).slice(2, 10) || "0";
  #count = 0;
  /** Watches the socket while it has routes; `heard()` per message, no timer per frame. */
  #watch: SilenceWatch | null = null;
  /** Waiting for the socket to show it is alive (a stop's). */
  #listeners: Array<{ resolve: () => void; reject: (error: ThinwireError) => void }> = [];

  constructor(socket: WebSocket) {
    this.#socket = socket;
    let open = false;
    this.opened = new Promise<void>((resolve, reject) => {
      socket.onopen = () => {
        open = true;
        resolve();
      };
      socket.onclose = (event: CloseEvent) => {
        const error = open ? closeError(event.code, event.reason) : handshakeError(event.code, event.reason);
        reject(error);
        this.#end(error);
      };
    });
    this.opened.catch(() => undefined);
    socket.onerror = () => undefined; // a close event follows and carries the outcome
    socket.onmessage = (event: MessageEvent) => {
      this.#watch?.heard();
      for (const listener of this.#listeners.splice(0)) listener.resolve();
      if (typeof event.data !== "string") return;
      // Under thinwire.v1.lines a message may hold several frames, one per line (JSON
      // never holds a raw newline); under thinwire.v1 it holds one.
      for (const line of event.data.split("\n")) this.#receive(line);
    };
  }

  /** Sends `command` with a fresh `requestId`; a `kind` opens the route its answer comes to. */
  send(command: Command): void;
  send(command: Command, kind: RouteKind): Route;
  send(command: Command, kind?: RouteKind): Route | void {
    if (this.closed) throw this.closed;
    if (this.#socket.readyState !== OPEN) throw closeError(1006, "");
    this.#count += 1;
    const requestId = `${this.#prefix}-${this.#count}`;
    this.#socket.send(JSON.stringify({ ...command, requestId }));
    if (kind === undefined) return;
    // No answer can arrive before this task ends: the route is in place in time.
    const route = new Route(kind, requestId, command.contextId ?? null);
    this.#routes.set(requestId, route);
    if (!this.#watch) {
      const limit = silenceLimitMs(null); // no header names it: the default, which a socket's heartbeats keep to
      this.#watch = new SilenceWatch(limit, () => {
        this.#end(silentStream(limit));
        this.close();
      });
    }
    return route;
  }

  /** The request no longer wants its frames. */
  release(route: Route): void {
    this.#routes.delete(route.requestId);
    if (this.#routes.size > 0) return;
    this.#watch?.stop();
    this.#watch = null;
  }

  /**
   * Resolves once a message shows the socket alive, or at once when nothing is
   * followed (the server then owes no message); rejects when the socket closes
   * or is taken as broken first.
   */
  heard(): Promise<void> {
    if (this.closed) return Promise.reject(this.closed);
    if (!this.#watch) return Promise.resolve();
    return new Promise((resolve, reject) => this.#listeners.push({ resolve, reject }));
  }

  close(): void {
    if (this.#socket.readyState < CLOSING) this.#socket.close(1000);
  }

  /** The socket is over (closed, or taken as broken): every request on it fails with `error`. */
  #end(error: ThinwireError): void {
    if (this.closed) return;
    this.closed = error;
    this.#watch?.stop();
    this.#watch = null;
    for (const route of this.#routes.values()) route.fail(error);
    this.#routes.clear();
    for (const listener of this.#listeners.splice(0)) listener.reject(error);
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
    for (const route of this.#routes.values()) route.offer(frame);
  }

  #reject(frame: RejectedFrame): void {
    const route = typeof frame.requestId === "string" ? this.#routes.get(frame.requestId) : undefined;
    if (!route) return; // a refused stop, or a refusal before the socket closes (the close says it all)
    if (frame.code === "no_run" && route.kind === "attach") {
      route.end();
      return;
    }
    route.fail(
      serverError(frame.code, frame.message, {
        retryable: typeof frame.retryable === "boolean" ? frame.retryable : RETRYABLE_CODES.has(frame.code),
        ...(typeof frame.interruptId === "string" ? { interruptId: frame.interruptId } : {}),
      }),
    );
  }
}

/** The frames one request is waiting for, queued until it reads them. */
export class Route {
  runId: string | null = null;
  #items: Array<RunFrame | null | { error: ThinwireError }> = [];
  #wake: (() => void) | null = null;
  #finished = false;

  constructor(
    readonly kind: RouteKind,
    readonly requestId: string,
    /** Known up front for an attach; the others learn it from their run_start. */
    public contextId: string | null,
  ) {}

  /** Takes the frame if it belongs to this request's run. */
  offer(frame: RunFrame): void {
    if (this.#finished) return;
    if (this.runId === null) {
      if (this.kind === "attach") {
        // An attach follows whichever run of its context the server sends.
        if (frame.contextId !== this.contextId) return;
      } else if (frame.type !== "run_start" || frame.requestId !== this.requestId) {
        // A send, a decision, a regeneration or an edit is answered by the run_start that names it.
        return;
      }
      this.contextId = frame.contextId;
      this.runId = frame.runId;
    } else if (frame.contextId !== this.contextId || frame.runId !== this.runId) {
      return;
    }
    this.#put(frame);
    if (frame.type === "done") this.end();
  }

  end(): void {
    this.#put(null);
    this.#finished = true;
  }

  fail(error: ThinwireError): void {
    this.#put({ error });
    this.#finished = true;
  }

  /** The next frame; null once the run is over. */
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

/**
 * The reason the server's WebSocket layer (uvicorn's, the websockets library's) gives
 * when the client did not answer its keepalive ping in time: the connection failed, the
 * server did not.
 */
const KEEPALIVE_TIMEOUT = "keepalive ping timeout";

/** The error a close code stands for (`CLOSE_CODES`); any other close is a retryable network error. */
export function closeError(code: number, reason: string): ThinwireError {
  const keepaliveLost = code === 1011 && reason === KEEPALIVE_TIMEOUT;
  const errorCode = keepaliveLost ? "network_error" : (CLOSE_CODES[code] ?? "network_error");
  const retryable = RETRYABLE_CODES.has(errorCode);
  if (errorCode === "too_many_streams") return new ThinwireError(errorCode, TOO_MANY_STREAMS, { retryable });
  const detail = reason ? `: ${reason}` : "";
  return new ThinwireError(errorCode, `${ERROR_CODES[errorCode]} (WebSocket closed with ${code}${detail})`, { retryable });
}

/**
 * The cap counts every stream of the user, on any tab or process: one client
 * alone meets it when the clients before it left their sockets open.
 */
const TOO_MANY_STREAMS =
  "Too many streams open at once for this user (WebSocket closed with 4429): close clients you no longer use — " +
  'dispose() closes the socket of a client made with transport: "websocket"; a WebSocketTransport you pass in is yours to close.';

/**
 * A socket that closed before it opened. A browser reports a refused handshake
 * — a page of an origin the server does not allow (which the server answers
 * with HTTP 403), a wrong URL — as 1006, exactly like a server it cannot
 * reach: a retryable `network_error` that says so.
 */
export function handshakeError(code: number, reason: string): ThinwireError {
  if (code !== 1006) return closeError(code, reason);
  return new ThinwireError(
    "network_error",
    "The WebSocket handshake failed (closed with 1006): the server could not be reached, or refused the socket " +
      "(a page of an origin the server does not allow is answered HTTP 403, which a browser reports only as a " +
      "failed connection; its console shows the status).",
    { retryable: true },
  );
}
