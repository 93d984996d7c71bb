"use client";
/**
 * useAgent: a thin React binding over `AgentClient` — the client's snapshot
 * through `useSyncExternalStore`, and its commands.
 *
 * Which client: `useAgent(options)` owns one, made from the options
 * (`use-owned-client.ts`: one per agent, baseUrl, persist.userId, explicit
 * contextId, transport kind and credentials); `useAgent()` binds to the
 * nearest `AgentProvider`'s, so several components share one conversation;
 * `useAgent({ client })` binds to a client you made, which stays yours to
 * dispose. Whichever it is, the hook starts it (`start()` is idempotent).
 *
 * Streaming frames are announced at most once per animation frame and 60
 * times a second (`@thinwire/client`'s `nextFrame`); status changes are
 * announced at once, and count towards the 60. With `persist`, the
 * conversation id (and nothing else) lives in storage under
 * `contextStorageKey(agent, userId)`, read once hydrated (`hydrated.ts`): the
 * render that hydrates server HTML shows no conversation, as the server did.
 * Turns carry the server's ids, so `turn.id` is a key that holds from the
 * stream to the transcript; `regenerate`, `edit` and `switchBranch` move
 * between the branches the server keeps. A long conversation is shown a page
 * at a time (`pageSize`); `loadEarlier` adds the page before, while
 * `hasEarlier`.
 */
import type { AgentClient, SendOptions, SendResult, Snapshot } from "@thinwire/client";
import { useContext, useEffect, useMemo, useRef, useSyncExternalStore } from "react";
import type { UseAgentOptions } from "./agent-options.js";
import { AgentContext } from "./agent-provider.js";
import { useHydrated } from "./hydrated.js";
import { useOwnedClient } from "./use-owned-client.js";

export type { UseAgentOptions } from "./agent-options.js";
export { contextStorageKey } from "./context-storage.js";

export interface UseAgentResult extends Omit<Snapshot, "contextId"> {
  /** The current conversation id; the only thing the client holds. */
  contextRef: { readonly current: string | null };
  /**
   * Sends a message (with `data`, extra public input for the agent, if given)
   * and streams the reply. Allowed after an error, which it clears.
   */
  send(text: string, options?: SendOptions): Promise<SendResult>;
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
   * Rejects when the stop request fails (`network_error`, the server's
   * refusal, `aborted` by a reset or unmount), changing nothing: catch it.
   *
   * ```tsx
   * <button onClick={() => stop().catch(() => {})}>Stop</button>
   * ```
   */
  stop(): Promise<void>;
  /**
   * Answers the last message again, on a new branch, and streams the new
   * reply like `send`; the reply shown leaves the view (the server keeps it as
   * a sibling). Afterwards the turns' `siblings` / `siblingIndex` are the
   * server's.
   */
  regenerate(): Promise<SendResult>;
  /**
   * Sends `text` in place of the user turn `turnId`, on a new branch forking
   * there, and streams the reply like `send`; the turns after it leave the view.
   *
   * ```tsx
   * <button onClick={() => edit(turn.id, draft).catch(() => {})}>Save</button>
   * ```
   */
  edit(turnId: string, text: string, options?: SendOptions): Promise<SendResult>;
  /**
   * Shows alternative `index` (from 0) of the exchange of the turn `turnId`.
   *
   * ```tsx
   * {turn.siblings > 1 && (
   *   <button onClick={() => switchBranch(turn.id, turn.siblingIndex - 1).catch(() => {})}>‹</button>
   * )}
   * ```
   */
  switchBranch(turnId: string, index: number): Promise<void>;
  /**
   * Shows the page of exchanges before the first turn, while `hasEarlier`;
   * one request at a time. A failure rejects and leaves the view (and
   * `error`) as it was.
   *
   * ```tsx
   * {hasEarlier && <button onClick={() => loadEarlier().catch(() => {})}>Show earlier messages</button>}
   * ```
   */
  loadEarlier(): Promise<void>;
  /**
   * Dismisses `error`; status `error` goes back to `idle` — or, when the
   * conversation shown never loaded (its transcript failed to load), it is
   * loaded again: status `hydrating`.
   */
  clearError(): void;
  reset(): void;
}

/** Binds to the nearest `AgentProvider`'s client. */
export function useAgent(): UseAgentResult;
/** Binds to a client you made (and dispose yourself). */
export function useAgent(options: { client: AgentClient }): UseAgentResult;
/** Binds to a client of this component's own, made from `options`. */
export function useAgent(options: UseAgentOptions): UseAgentResult;
/** Either of the two, chosen at run time (`own ? { client } : { agent }`). */
export function useAgent(options: UseAgentOptions | { client: AgentClient }): UseAgentResult;
export function useAgent(options?: UseAgentOptions | { client: AgentClient }): UseAgentResult {
  const provided = useContext(AgentContext);
  const given = options !== undefined && "client" in options ? options.client : null;
  const owned = useOwnedClient(options === undefined || given !== null ? null : (options as UseAgentOptions));
  const client = owned ?? given ?? provided?.client ?? null;
  if (client === null) {
    throw new Error("useAgent() without options reads the conversation of an <AgentProvider>: render it inside one.");
  }
  // Started once hydrated, as `useOwned` starts the client it makes.
  const hydrated = useHydrated();
  useEffect(() => {
    if (hydrated) void client.start();
  }, [client, hydrated]);
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
      send: (text: string, sendOptions?: SendOptions) => client.send(text, sendOptions),
      decide: (value: unknown) => client.decide(value),
      stop: () => client.stop(),
      regenerate: () => client.regenerate(),
      edit: (turnId: string, text: string, editOptions?: SendOptions) => client.edit(turnId, text, editOptions),
      switchBranch: (turnId: string, index: number) => client.switchBranch(turnId, index),
      loadEarlier: () => client.loadEarlier(),
      clearError: () => client.clearError(),
      reset: () => client.reset(),
    }),
    [client],
  );
  return useMemo(() => {
    const { contextId: _contextId, ...view } = snapshot;
    return { ...view, contextRef, ...commands };
  }, [snapshot, contextRef, commands]);
}
