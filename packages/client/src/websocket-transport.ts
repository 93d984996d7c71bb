/**
 * The WebSocket transport: one socket per transport instance, opened on first
 * use and reopened on the next use after it closed. Requests become commands
 * (`send`, `attach`, `decide`, `regenerate`, `edit`, `stop`); the frames of every run the socket
 * follows arrive interleaved and `websocket-connection.ts` routes them to the
 * request that asked for them, by the `requestId` the server echoes.
 *
 * Browsers cannot put headers on a WebSocket: the protocol version travels as
 * the subprotocol (`thinwire.v1.lines` offered first: several frames to a
 * message, one per line), and the cookies of the page authenticate the socket —
 * unless the request carries headers of the app's own (`headers`: a bearer
 * token, say). Then each connect first trades them for a ticket
 * (`websocket-ticket.ts`), and the socket opens at `…/ws?ticket=…`.
 */
import { aborted, resolveUrl, ThinwireError, toThinwireError } from "./errors.js";
import {
  type Command,
  type Frame,
  WEBSOCKET_SUBPROTOCOL,
  WEBSOCKET_SUBPROTOCOL_LINES,
} from "./generated/wire.js";
import {
  agentUrl,
  type RunFrame,
  type Transport,
  type TransportAttachRequest,
  type TransportDecideRequest,
  type TransportEditRequest,
  type TransportRegenerateRequest,
  type TransportRunRequest,
  type TransportStopRequest,
  type TransportTarget,
} from "./transport.js";
import { type CredentialsMode, globalFetch } from "./http.js";
import { closeError, Connection, type RouteKind } from "./websocket-connection.js";
import { fetchTicket, needsTicket, withTicket } from "./websocket-ticket.js";

export interface WebSocketTransportOptions {
  /**
   * The WebSocket class; defaults to the global one (Node.js has one from 22
   * on). Tests inject a fake. Without either, a request fails at once with
   * `websocket_unavailable`. (An AgentClient takes the class too, and then
   * makes, owns and closes the transport.)
   */
  WebSocket?: typeof WebSocket | undefined;
  /**
   * The socket URL; defaults to `{baseUrl}/agents/{agent}/ws` with the scheme
   * made `ws:`/`wss:`, a relative `baseUrl` resolved against the page location.
   */
  url?: (string | ((target: { baseUrl: string; agent: string }) => string)) | undefined;
  /**
   * Fetches the ticket a socket opens with when the requests carry `headers`
   * (`POST {baseUrl}/agents/{agent}/tickets`); defaults to the global `fetch`.
   */
  fetch?: typeof fetch | undefined;
  /** fetch's `credentials` for the ticket request (`"same-origin"` by default). */
  credentials?: CredentialsMode | undefined;
}

export class WebSocketTransport implements Transport {
  readonly #options: WebSocketTransportOptions;
  #socket: Socket | null = null;

  constructor(options: WebSocketTransportOptions = {}) {
    this.#options = options;
  }

  run({ body, signal, ...target }: TransportRunRequest): AsyncGenerator<Frame> {
    const command: Command = { type: "send", message: body.message };
    if (body.contextId != null) command.contextId = body.contextId;
    if (body.messageId != null) command.messageId = body.messageId;
    if (body.data != null) command.data = body.data;
    if (body.afterTurnId != null) command.afterTurnId = body.afterTurnId;
    return this.#follow(target, "send", command, signal);
  }

  attach({ contextId, after, signal, ...target }: TransportAttachRequest): AsyncGenerator<Frame> {
    return this.#follow(target, "attach", { type: "attach", contextId, after }, signal);
  }

  decide({ contextId, interruptId, value, signal, ...target }: TransportDecideRequest): AsyncGenerator<Frame> {
    return this.#follow(target, "decide", { type: "decide", contextId, interruptId, value }, signal);
  }

  regenerate({ contextId, body, signal, ...target }: TransportRegenerateRequest): AsyncGenerator<Frame> {
    const command: Command = { type: "regenerate", contextId };
    if (body.messageId != null) command.messageId = body.messageId;
    if (body.turnId != null) command.turnId = body.turnId;
    return this.#follow(target, "regenerate", command, signal);
  }

  edit({ contextId, body, signal, ...target }: TransportEditRequest): AsyncGenerator<Frame> {
    const command: Command = { type: "edit", contextId, turnId: body.turnId, message: body.message };
    if (body.messageId != null) command.messageId = body.messageId;
    if (body.data != null) command.data = body.data;
    return this.#follow(target, "edit", command, signal);
  }

  /**
   * The server does not acknowledge a stop: this resolves once the socket is
   * heard from after it (a frame, a heartbeat), and rejects when the socket
   * is closed or taken as broken first — a stop sent into a dead socket is lost.
   */
  async stop({ contextId, signal, ...target }: TransportStopRequest): Promise<void> {
    const connection = await this.#connect(target, signal);
    connection.send({ type: "stop", contextId });
    await untilAborted(connection.heard(), signal);
  }

  /** Closes the socket; a later request opens a new one. */
  close(): void {
    this.#socket?.close();
    this.#socket = null;
  }

  async *#follow(target: TransportTarget, kind: RouteKind, command: Command, signal: AbortSignal): AsyncGenerator<RunFrame> {
    const connection = await this.#connect(target, signal);
    const route = connection.send(command, kind);
    try {
      for (;;) {
        const frame = await untilAborted(route.next(), signal);
        if (frame === null) return;
        yield frame;
      }
    } finally {
      connection.release(route);
    }
  }

  /** The open socket, opening one (with a fresh ticket when `target` has headers) if there is none. */
  async #connect(target: TransportTarget, signal?: AbortSignal): Promise<Connection> {
    if (signal?.aborted) throw aborted();
    let socket = this.#socket;
    if (!socket?.usable) {
      socket = new Socket((opening) => this.#open(target, opening));
      this.#socket = socket;
    }
    return untilAborted(socket.ready, signal);
  }

  /**
   * Opens the socket `opening` stands for. The ticket request is no single
   * request's to cancel (others may wait for the same socket); `close()` during
   * it leaves the socket unopened.
   */
  async #open(target: TransportTarget, opening: Socket): Promise<Connection> {
    const Constructor = this.#options.WebSocket ?? globalThis.WebSocket;
    if (!Constructor) throw noWebSocket();
    let url = this.#url(target);
    if (needsTicket(target.headers)) {
      const fetchImpl = this.#options.fetch ?? globalFetch;
      const ticket = await fetchTicket(fetchImpl, this.#options.credentials ?? "same-origin", target);
      if (opening.closed) throw closeError(1000, "the transport was closed");
      url = withTicket(url, ticket);
    }
    let webSocket: WebSocket;
    try {
      // Several frames to a message where the server speaks it (a burst in one write).
      webSocket = new Constructor(url, [WEBSOCKET_SUBPROTOCOL_LINES, WEBSOCKET_SUBPROTOCOL]);
    } catch (error) {
      throw toThinwireError(error);
    }
    const connection = new Connection(webSocket);
    opening.connection = connection;
    await connection.opened;
    return connection;
  }

  #url(target: Omit<TransportTarget, "headers">): string {
    const option = this.#options.url;
    if (typeof option === "function") return option(target);
    if (typeof option === "string") return option;
    return webSocketUrl(agentUrl(target, "/ws"));
  }
}

/** A socket of the transport: opening (its ticket, then its handshake), open, failed or closed. */
class Socket {
  connection: Connection | null = null;
  failed = false;
  closed = false;
  readonly ready: Promise<Connection>;

  constructor(open: (socket: Socket) => Promise<Connection>) {
    this.ready = open(this);
    this.ready.then(undefined, () => {
      this.failed = true;
    });
  }

  /** Open or opening: a request may use it. */
  get usable(): boolean {
    return !this.failed && !this.closed && !this.connection?.closed;
  }

  close(): void {
    this.closed = true;
    this.connection?.close();
  }
}

/**
 * No WebSocket class to open a socket with (Node.js before 22 has no global
 * one): a mistake of the setup, not a fault of the network, so it is shown at
 * once — not retryable, so never tried again.
 */
function noWebSocket(): ThinwireError {
  return new ThinwireError(
    "websocket_unavailable",
    "This environment has no WebSocket: use Node.js 22 or later (on Node.js 20, run node --experimental-websocket), " +
      'or give a WebSocket class: new AgentClient({ transport: "websocket", WebSocket, … }), which closes its socket ' +
      "on dispose(), or new WebSocketTransport({ WebSocket }), which is yours to close.",
  );
}

/** Makes an http(s) or relative URL a ws(s) one, relative ones resolved against the page. */
export function webSocketUrl(url: string): string {
  const resolved = resolveUrl(url, "there is no page to resolve it against; give an absolute baseUrl or the url option.");
  if (resolved.protocol === "http:") resolved.protocol = "ws:";
  else if (resolved.protocol === "https:") resolved.protocol = "wss:";
  return resolved.href;
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
