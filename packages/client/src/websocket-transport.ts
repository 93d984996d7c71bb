/**
 * The WebSocket transport: one socket per transport instance, opened on first
 * use and reopened on the next use after it closed. Requests become commands
 * (`send`, `attach`, `decide`, `stop`); the frames of every run the socket
 * follows arrive interleaved and `websocket-connection.ts` routes them to the
 * request that asked for them, by the `requestId` the server echoes.
 *
 * Browsers cannot put headers on a WebSocket: the cookies of the page
 * authenticate it, and the protocol version travels as the subprotocol.
 */
import { aborted, ThinwireError, toThinwireError } from "./errors.js";
import { type Command, type Frame, WEBSOCKET_SUBPROTOCOL } from "./generated/wire.js";
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
import { Connection, type RouteKind } from "./websocket-connection.js";

export interface WebSocketTransportOptions {
  /** The WebSocket class; defaults to the global one. Tests inject a fake. */
  WebSocket?: typeof WebSocket;
  /**
   * The socket URL; defaults to `{baseUrl}/agents/{agent}/ws` with the scheme
   * made `ws:`/`wss:`, a relative `baseUrl` resolved against the page location.
   */
  url?: string | ((target: { baseUrl: string; agent: string }) => string);
}

type Where = Omit<TransportTarget, "headers">;

export class WebSocketTransport implements Transport {
  readonly #options: WebSocketTransportOptions;
  #connection: Connection | null = null;

  constructor(options: WebSocketTransportOptions = {}) {
    this.#options = options;
  }

  run({ body, signal, ...target }: TransportRunRequest): AsyncGenerator<Frame> {
    const command: Command = { type: "send", message: body.message };
    if (body.contextId != null) command.contextId = body.contextId;
    if (body.messageId != null) command.messageId = body.messageId;
    return this.#follow(target, "send", command, signal);
  }

  attach({ contextId, after, signal, ...target }: TransportAttachRequest): AsyncGenerator<Frame> {
    return this.#follow(target, "attach", { type: "attach", contextId, after }, signal);
  }

  decide({ contextId, interruptId, value, signal, ...target }: TransportDecideRequest): AsyncGenerator<Frame> {
    return this.#follow(target, "decide", { type: "decide", contextId, interruptId, value }, signal);
  }

  /** Resolves once the command is sent: the server does not acknowledge a stop. */
  async stop({ contextId, signal, ...target }: TransportStopRequest): Promise<void> {
    const connection = await this.#connect(target, signal);
    connection.send({ type: "stop", contextId });
  }

  /** Closes the socket; a later request opens a new one. */
  close(): void {
    this.#connection?.close();
    this.#connection = null;
  }

  async *#follow(target: Where, kind: RouteKind, command: Command, signal: AbortSignal): AsyncGenerator<RunFrame> {
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

  async #connect(target: Where, signal?: AbortSignal): Promise<Connection> {
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

  #url(target: Where): string {
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
