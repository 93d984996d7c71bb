"use client";
/**
 * useConversations: the caller's conversations with an agent — a thin React
 * binding over `ConversationList`, as `useAgent` is over `AgentClient`.
 *
 * Under an `AgentProvider` the list shares the provider's client: its
 * selection is the conversation the chat shows, `select` opens one there,
 * `create` starts a new one, and every run the chat finishes refreshes the
 * list. With `persist`, only that selection — the conversation id — is
 * stored, as before. `useConversations()` with no options takes the agent,
 * `baseUrl`, `headers`, `credentials` and `fetch` of a provider made from
 * options; `{ client }` shares a client you made instead, `{ client: null }`
 * keeps a selection of the list's own.
 *
 * The hook owns its list (`use-owned.ts`): one per agent, baseUrl, pageSize,
 * credentials and client; it loads the first page when it mounts.
 */
import {
  type AgentClient,
  ConversationList,
  type ConversationListOptions,
  type ConversationListSnapshot,
  type ConversationSummary,
} from "@thinwire/client";
import { useContext, useMemo, useRef, useSyncExternalStore } from "react";
import { AgentContext, type ProvidedAgent } from "./agent-provider.js";
import { useOwned } from "./use-owned.js";

export interface UseConversationsOptions extends Omit<ConversationListOptions, "client"> {
  /**
   * The client whose conversation is the selection: by default the nearest
   * AgentProvider's; `null` keeps a selection of the list's own.
   */
  client?: AgentClient | null | undefined;
}

export interface UseConversationsResult extends ConversationListSnapshot {
  /** Loads the next page (when `hasMore`). Never rejects: a failure is `error`. */
  loadMore(): Promise<void>;
  /** Loads the list again from the top. Never rejects. */
  refresh(): Promise<void>;
  /** Renames a conversation (1–200 characters); rejects with the refusal, which `error` shows too. */
  rename(contextId: string, title: string): Promise<ConversationSummary>;
  /** Forgets a conversation on the server; the selected one gives way to a new conversation. */
  remove(contextId: string): Promise<void>;
  /** Shows this conversation (in the provider's chat, when there is one). */
  select(contextId: string): Promise<void>;
  /** Starts a new conversation. */
  create(): void;
}

/** The list of the nearest AgentProvider's agent, sharing its conversation; the provider must be made from options. */
export function useConversations(): UseConversationsResult;
/** The list of `options.agent`'s conversations. */
export function useConversations(options: UseConversationsOptions): UseConversationsResult;
export function useConversations(options?: UseConversationsOptions): UseConversationsResult {
  const provided = useContext(AgentContext);
  const latest = useRef({ options, provided });
  latest.current = { options, provided };
  const connection = options ?? provided?.options?.current;
  if (!connection) {
    throw new Error(
      "useConversations() without options reads the agent of an <AgentProvider> made from options: " +
        "render it inside one, or pass { agent }.",
    );
  }
  const client = options?.client !== undefined ? options.client : (provided?.client ?? null);
  const list = useOwned(
    () =>
      new ConversationList({
        agent: connection.agent,
        baseUrl: connection.baseUrl,
        pageSize: options?.pageSize,
        credentials: connection.credentials,
        fetch: connection.fetch,
        client,
        get headers() {
          return currentHeaders(latest.current);
        },
      }),
    [connection.agent, connection.baseUrl ?? null, options?.pageSize ?? null, connection.credentials ?? null, client],
  )!;
  const snapshot = useSyncExternalStore(list.subscribe, list.getSnapshot, list.getSnapshot);
  const commands = useMemo(
    () => ({
      loadMore: () => list.loadMore(),
      refresh: () => list.refresh(),
      rename: (contextId: string, title: string) => list.rename(contextId, title),
      remove: (contextId: string) => list.remove(contextId),
      select: (contextId: string) => list.select(contextId),
      create: () => list.create(),
    }),
    [list],
  );
  return useMemo(() => ({ ...snapshot, ...commands }), [snapshot, commands]);
}

/** The latest headers: the hook's options', else the provider's. */
function currentHeaders({
  options,
  provided,
}: {
  options: UseConversationsOptions | undefined;
  provided: ProvidedAgent | null;
}): Record<string, string> | undefined {
  return options ? options.headers : provided?.options?.current.headers;
}
