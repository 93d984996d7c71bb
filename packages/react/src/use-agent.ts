/**
 * useAgent: a thin React binding over `AgentClient`.
 *
 * One client per (agent, baseUrl, persist.userId, explicit contextId, transport
 * kind); its snapshot is read with `useSyncExternalStore`. The client owns the
 * wire, including a transport it created for `"sse"` or `"websocket"`, which
 * its `dispose()` closes. Streaming frames are announced at most once per
 * animation frame and 60 times a second (`commit-schedule.ts`); status changes
 * are announced at once, and count towards the 60. With `persist`, the
 * conversation id (and nothing else) lives in storage under
 * `contextStorageKey(agent, userId)`, so a reload resumes the conversation.
 * The options are read through a ref, so the client always calls the latest
 * `onContext` and sends the latest `headers`.
 *
 * StrictMode and <Activity> run effect cleanups that are not real unmounts.
 * Disposal is therefore deferred by a microtask and cancelled when the effect
 * comes back with the same client; a client that did get disposed while hidden
 * is replaced by a fresh one that resumes the same context.
 */
import { AgentClient, type ReconnectOptions, type SendResult, type Snapshot, type Transport } from "@thinwire/client";
import { useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";
import { MIN_COMMIT_INTERVAL_MS, nextFrame } from "./commit-schedule.js";
import { contextStorage } from "./context-storage.js";

export { contextStorageKey } from "./context-storage.js";

export interface UseAgentOptions {
  /** The agent's name, as mounted on the server. */
  agent: string;
  /** Prefix of the thinwire routes; defaults to the page origin. */
  baseUrl?: string;
  /**
   * `"sse"` (the default), `"websocket"` (one socket per hook, at
   * `{baseUrl}/agents/{agent}/ws`, relative to the page when `baseUrl` is), or
   * a Transport of your own (which you close when you are done with it).
   */
  transport?: "sse" | "websocket" | Transport;
  fetch?: typeof fetch;
  /** Sent with every request; read at request time, so a refreshed token is picked up. */
  headers?: Record<string, string>;
  /** Resume this conversation (`null`: start a new one, ignoring storage). */
  contextId?: string | null;
  /** Remember the conversation id per user, in `localStorage` unless `storage` is given. */
  persist?: { userId: string; storage?: Storage };
  /**
   * How a broken stream is reattached, and a send whose response never started
   * sent again under its `messageId` (read when the client is created).
   */
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

export function useAgent(options: UseAgentOptions): UseAgentResult {
  const latest = useRef(options);
  latest.current = options;
  const client = useClient(latest);
  const snapshot = useSyncExternalStore(client.subscribe, client.getSnapshot, client.getSnapshot);

  const clientRef = useRef(client);
  clientRef.current = client;
  const contextRef = useMemo(
    () => ({
      get current(): string | null {
        return clientRef.current.getSnapshot().contextId;
      },
    }),
    [],
  );
  const commands = useMemo(
    () => ({
      send: (text: string) => client.send(text),
      decide: (value: unknown) => client.decide(value),
      stop: () => client.stop(),
      reset: () => client.reset(),
    }),
    [client],
  );
  return useMemo(() => {
    const { contextId: _contextId, ...view } = snapshot;
    return { ...view, contextRef, ...commands };
  }, [snapshot, contextRef, commands]);
}

/** The client of the current options: started when its effect runs, disposed (deferred) when it goes. */
function useClient(latest: { readonly current: UseAgentOptions }): AgentClient {
  const options = latest.current;
  const key = JSON.stringify([
    options.agent,
    options.baseUrl ?? null,
    options.persist?.userId ?? null,
    options.contextId === undefined ? 0 : options.contextId,
    typeof options.transport === "object" ? "custom" : (options.transport ?? "sse"),
  ]);
  // The context a replacement for a client disposed while hidden resumes; read once.
  const resume = useRef<string | null | undefined>(undefined);
  const [revision, setRevision] = useState(0);
  const client = useMemo(() => {
    const contextId = resume.current;
    resume.current = undefined;
    return createClient(latest, contextId);
  }, [key, revision]);

  const disposal = useRef<{ client: AgentClient; cancelled: boolean; disposed: boolean } | null>(null);
  useEffect(() => {
    const pending = disposal.current;
    if (pending?.client === client) {
      if (pending.disposed) {
        resume.current = client.getSnapshot().contextId;
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
      });
    };
  }, [client]);
  return client;
}

/** A client for the options in `latest`, resuming `resumed` when given. */
function createClient(latest: { readonly current: UseAgentOptions }, resumed: string | null | undefined): AgentClient {
  const options = latest.current;
  const storage = options.persist ? contextStorage(options.agent, options.persist) : null;
  let contextId = options.contextId ?? null;
  if (resumed !== undefined) contextId = resumed;
  else if (options.contextId === undefined && storage) contextId = storage.read();
  return new AgentClient({
    agent: options.agent,
    baseUrl: options.baseUrl,
    transport: options.transport,
    fetch: options.fetch,
    reconnect: options.reconnect,
    contextId,
    schedule: nextFrame,
    minNotifyInterval: MIN_COMMIT_INTERVAL_MS,
    get headers() {
      return latest.current.headers;
    },
    onContext(id) {
      storage?.write(id);
      latest.current.onContext?.(id);
    },
  });
}
