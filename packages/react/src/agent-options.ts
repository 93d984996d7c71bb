/**
 * The options `useAgent` and `AgentProvider` take, and the AgentClient they
 * make. The client reads the options through a ref, so it always calls the
 * latest `onContext`, `onFinish` and `onError` and sends the latest `headers`.
 */
import {
  AgentClient,
  type AgentErrorInfo,
  type CredentialsMode,
  MIN_FRAME_INTERVAL_MS,
  nextFrame,
  type PersistStorage,
  type ReconnectOptions,
  type SendResult,
  type ThinwireError,
  type Transport,
} from "@thinwire/client";
import { contextStorage } from "./context-storage.js";

export interface UseAgentOptions {
  /** The agent's name, as mounted on the server. */
  agent: string;
  /** Prefix of the thinwire routes; defaults to the page origin. */
  baseUrl?: string | undefined;
  /**
   * `"sse"` (the default), `"websocket"` (one socket per client, at
   * `{baseUrl}/agents/{agent}/ws`, relative to the page when `baseUrl` is), or
   * a Transport of your own (which you close when you are done with it).
   */
  transport?: "sse" | "websocket" | Transport | undefined;
  fetch?: typeof fetch | undefined;
  /**
   * fetch's `credentials` for every request: `"same-origin"` (the default), or
   * `"include"` for a server of another origin that authenticates with cookies.
   */
  credentials?: CredentialsMode | undefined;
  /**
   * Sent with every request; read at request time, so a refreshed token is
   * picked up. Over a WebSocket they fetch a ticket that opens the socket.
   */
  headers?: Record<string, string> | undefined;
  /** Resume this conversation (`null`: start a new one, ignoring storage). */
  contextId?: string | null | undefined;
  /**
   * Exchanges per page of a transcript: a resumed conversation shows its
   * last `pageSize` (default 50), and `loadEarlier` the page before; a whole
   * number from 1 to 1000, or `Infinity` for the whole transcript (read when
   * the client is created).
   */
  pageSize?: number | undefined;
  /**
   * Remember the conversation id per user, in `localStorage` unless `storage`
   * is given; and keep this user's tabs of this origin in step (their runs and
   * lists, told by ids over a BroadcastChannel: see `tabChannel`).
   */
  persist?: { userId: string; storage?: PersistStorage | undefined } | undefined;
  /**
   * How a broken stream is reattached, a send whose response never started
   * sent again under its `messageId`, and a transcript that failed to load
   * loaded again (read when the client is created).
   */
  reconnect?: ReconnectOptions | undefined;
  /** Called with the new id whenever the conversation changes; the latest callback is used. */
  onContext?: ((id: string | null) => void) | undefined;
  /** Called with the result of every run, whatever its stop reason; the latest callback is used. */
  onFinish?: ((result: SendResult) => void) | undefined;
  /**
   * Called when a run or its request failed: the ThinwireError a send rejects
   * with, or the run's error when it ended with stop reason `error`; the
   * latest callback is used.
   */
  onError?: ((error: ThinwireError | AgentErrorInfo) => void) | undefined;
}

/** What identifies a client made from `options`: a change of any of these makes a new one. */
export function clientKey(options: UseAgentOptions): string {
  return JSON.stringify([
    options.agent,
    options.baseUrl ?? null,
    options.persist?.userId ?? null,
    options.contextId === undefined ? 0 : options.contextId,
    typeof options.transport === "object" ? "custom" : (options.transport ?? "sse"),
    options.credentials ?? null,
  ]);
}

/**
 * A client for the options in `latest`, resuming `resumed` when given, else
 * the id `persist` stored — when `readStorage` (not while hydrating: the
 * server had no storage).
 */
export function createClient(
  latest: { readonly current: UseAgentOptions },
  resumed: string | null | undefined,
  readStorage: boolean,
): AgentClient {
  const options = latest.current;
  const storage = options.persist ? contextStorage(options.agent, options.persist) : null;
  let contextId = options.contextId ?? null;
  if (resumed !== undefined) contextId = resumed;
  else if (options.contextId === undefined && storage && readStorage) contextId = storage.read();
  return new AgentClient({
    agent: options.agent,
    baseUrl: options.baseUrl,
    transport: options.transport,
    fetch: options.fetch,
    credentials: options.credentials,
    reconnect: options.reconnect,
    pageSize: options.pageSize,
    contextId,
    tabChannel: options.persist ? tabChannel(options.agent, options.baseUrl, options.persist.userId) : undefined,
    // React commits once per animation frame, at most 60 times a second.
    schedule: nextFrame,
    minNotifyInterval: MIN_FRAME_INTERVAL_MS,
    get headers() {
      return latest.current.headers;
    },
    onContext(id) {
      storage?.write(id);
      latest.current.onContext?.(id);
    },
    onFinish: (result) => latest.current.onFinish?.(result),
    onError: (error) => latest.current.onError?.(error),
  });
}

/** The channel of one user's tabs of one agent: another user's tabs are on another. */
function tabChannel(agent: string, baseUrl: string | undefined, userId: string): string {
  return `thinwire:tabs:${JSON.stringify([baseUrl ?? "", agent, userId])}`;
}
