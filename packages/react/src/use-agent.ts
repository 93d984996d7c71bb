/**
 * useAgent: a thin React binding over `AgentClient`.
 *
 * One client per (agent, baseUrl, persist.userId, explicit contextId, transport
 * kind); its snapshot is read with `useSyncExternalStore`. Streaming frames are
 * announced at most once per animation frame and 60 times a second (the client's
 * `schedule` over `requestAnimationFrame`, with `minNotifyInterval`); status
 * changes are announced at once, and count towards the 60.
 * With `persist`, the conversation id (and nothing else) lives in storage under
 * `contextStorageKey(agent, userId)`, so a reload resumes the conversation.
 *
 * StrictMode and <Activity> run effect cleanups that are not real unmounts.
 * Disposal is therefore deferred by a microtask and cancelled when the effect
 * comes back with the same client; a client that did get disposed while hidden
 * is replaced by a fresh one that resumes the same context.
 */
import {
  AgentClient,
  type ReconnectOptions,
  type SendResult,
  type Snapshot,
  type Transport,
  WebSocketTransport,
} from "@thinwire/client";
import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";

export interface UseAgentOptions {
  /** The agent's name, as mounted on the server. */
  agent: string;
  /** Prefix of the thinwire routes; defaults to the page origin. */
  baseUrl?: string;
  /**
   * `"sse"` (the default), `"websocket"` (one socket per hook, at
   * `{baseUrl}/agents/{agent}/ws`, relative to the page when `baseUrl` is), or
   * a Transport of your own.
   */
  transport?: "sse" | "websocket" | Transport;
  fetch?: typeof fetch;
  /** Sent with every request; read at request time, so a refreshed token is picked up. */
  headers?: Record<string, string>;
  /** Resume this conversation (`null`: start a new one, ignoring storage). */
  contextId?: string | null;
  /** Remember the conversation id per user, in `localStorage` unless `storage` is given. */
  persist?: { userId: string; storage?: Storage };
  /** How a broken stream is retried (read when the client is created). */
  reconnect?: ReconnectOptions;
  /** Called with the new id whenever the conversation changes; the latest callback is used. */
  onContext?: (id: string | null) => void;
}

export interface UseAgentResult extends Omit<Snapshot, "contextId"> {
  /** The current conversation id; the only thing the client holds. */
  contextRef: { readonly current: string | null };
  send(text: string): Promise<SendResult>;
  /**
   * Answers the pending `interrupt` with one of its `options` (or a value
   * matching its `decisionSchema`) and streams the run it continues, like
   * `send`. A refused decision leaves the interrupt pending and shows `error`.
   *
   * ```tsx
   * {interrupt?.options?.map((option) => (
   *   <button key={option} onClick={() => decide(option).catch(() => {})}>{option}</button>
   * ))}
   * ```
   */
  decide(value: unknown): Promise<SendResult>;
  /**
   * Asks the server to stop the reply being streamed; `send` then resolves with
   * stop reason `stopped`. While a decision is pending, ends the waiting run.
   */
  stop(): Promise<void>;
  reset(): void;
}

/** Where `persist` keeps a user's conversation id for an agent. */
export function contextStorageKey(agent: string, userId: string): string {
  return `thinwire:${agent}:${encodeURIComponent(userId)}:contextId`;
}

export function useAgent(options: UseAgentOptions): UseAgentResult {
  const latest = useRef(options);
  latest.current = options;
  const resumeRef = useRef<string | null | undefined>(undefined);
  const [revision, setRevision] = useState(0);
  const key = JSON.stringify([
    options.agent,
    options.baseUrl ?? null,
    options.persist?.userId ?? null,
    options.contextId === undefined ? 0 : options.contextId,
    typeof options.transport === "object" ? "custom" : (options.transport ?? "sse"),
  ]);
  // The key is the identity of the client; `revision` replaces one disposed while hidden.
  const client = useMemo(() => createClient(latest, resumeRef), [key, revision]);
  const clientRef = useRef(client);
  clientRef.current = client;

  const disposal = useRef<{ client: AgentClient; cancelled: boolean; disposed: boolean } | null>(null);
  useEffect(() => {
    const pending = disposal.current;
    if (pending?.client === client) {
      if (pending.disposed) {
        resumeRef.current = client.getSnapshot().contextId;
        setRevision((value) => value + 1);
        return;
      }
      pending.cancelled = true;
    }
    void client.start();
    return () => {
      const ticket = { client, cancelled: false, disposed: false };
      disposal.current = ticket;
      queueMicrotask(() => {
        if (ticket.cancelled) return;
        ticket.disposed = true;
        client.dispose();
        ownedTransports.get(client)?.close();
      });
    };
  }, [client]);

  const snapshot = useSyncExternalStore(client.subscribe, client.getSnapshot, client.getSnapshot);
  const send = useCallback((text: string) => client.send(text), [client]);
  const decide = useCallback((value: unknown) => client.decide(value), [client]);
  const stop = useCallback(() => client.stop(), [client]);
  const reset = useCallback(() => client.reset(), [client]);
  const contextRef = useMemo(
    () => ({
      get current(): string | null {
        return clientRef.current.getSnapshot().contextId;
      },
    }),
    [],
  );

  return useMemo(() => {
    const { contextId: _contextId, ...view } = snapshot;
    return { ...view, contextRef, send, decide, stop, reset };
  }, [snapshot, contextRef, send, decide, stop, reset]);
}

/** Transports a hook created itself, closed with their client. */
const ownedTransports = new WeakMap<AgentClient, WebSocketTransport>();

/**
 * Announces streaming changes once per animation frame. Where there are no frames — no
 * `requestAnimationFrame`, or a hidden tab, where browsers pause them — a 16 ms timer
 * (which browsers slow down in the background) keeps the view current instead.
 */
/** Animation frames closer than this to the previous commit are skipped: at most 60
 * commits a second on any display (a 120 Hz one commits every other frame). A little
 * under 1/60 s, so a 60 Hz display's frames, which jitter, all count. */
const MIN_COMMIT_INTERVAL_MS = 1000 / 60 - 1;

function nextFrame(flush: () => void): void {
  const hidden = typeof document !== "undefined" && document.visibilityState === "hidden";
  if (typeof requestAnimationFrame === "function" && !hidden) requestAnimationFrame(() => flush());
  else setTimeout(flush, 16);
}

function createClient(
  latest: { readonly current: UseAgentOptions },
  resumeRef: { current: string | null | undefined },
): AgentClient {
  const options = latest.current;
  const persist = options.persist;
  const storage = persist ? (persist.storage ?? defaultStorage()) : null;
  const storageKey = persist ? contextStorageKey(options.agent, persist.userId) : null;

  let contextId = options.contextId ?? null;
  if (resumeRef.current !== undefined) {
    contextId = resumeRef.current;
    resumeRef.current = undefined;
  } else if (options.contextId === undefined && storage && storageKey) {
    contextId = readId(storage, storageKey);
  }

  const owned = options.transport === "websocket" ? new WebSocketTransport() : null;
  const transport = owned ?? (typeof options.transport === "object" ? options.transport : undefined);
  const client = new AgentClient({
    agent: options.agent,
    ...(options.baseUrl === undefined ? {} : { baseUrl: options.baseUrl }),
    ...(transport === undefined ? {} : { transport }),
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.reconnect === undefined ? {} : { reconnect: options.reconnect }),
    schedule: nextFrame,
    minNotifyInterval: MIN_COMMIT_INTERVAL_MS,
    contextId,
    get headers() {
      return latest.current.headers;
    },
    onContext(id) {
      if (storage && storageKey) writeId(storage, storageKey, id);
      latest.current.onContext?.(id);
    },
  });
  if (owned) ownedTransports.set(client, owned);
  return client;
}

function defaultStorage(): Storage | null {
  try {
    return typeof window === "undefined" ? null : window.localStorage;
  } catch {
    return null; // storage disabled (privacy mode, sandboxed frame)
  }
}

function readId(storage: Storage, key: string): string | null {
  try {
    return storage.getItem(key) || null;
  } catch {
    return null;
  }
}

function writeId(storage: Storage, key: string, id: string | null): void {
  try {
    if (id === null) storage.removeItem(key);
    else storage.setItem(key, id);
  } catch {
    // A full or disabled storage only costs the resume after a reload.
  }
}
