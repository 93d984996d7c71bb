"use client";
/**
 * AgentProvider: one conversation shared by every component below it. It owns
 * one AgentClient made from the options `useAgent` takes (and disposes it when
 * it unmounts), or shares a `client` you made (which stays yours); `useAgent()`
 * with no options binds to it, and `useConversations` shares its selection.
 */
import type { AgentClient } from "@thinwire/client";
import { createContext, type ReactElement, type ReactNode, useMemo, useRef } from "react";
import type { UseAgentOptions } from "./agent-options.js";
import { useOwnedClient } from "./use-owned-client.js";

/** What the nearest AgentProvider shares: its client, and the options it made it from (none for a client given). */
export interface ProvidedAgent {
  client: AgentClient;
  options: { readonly current: UseAgentOptions } | null;
}

export const AgentContext = createContext<ProvidedAgent | null>(null);

export type AgentProviderProps = (UseAgentOptions | { client: AgentClient }) & { children?: ReactNode };

/**
 * Shares one conversation with the components below it: a chat, a sidebar and
 * an approval card that call `useAgent()` see the same snapshot, and a list of
 * conversations (`useConversations()`) selects the one they show. Takes the
 * options of `useAgent(options)`, or `client` (an AgentClient you made, which
 * stays yours to dispose).
 *
 * ```tsx
 * <AgentProvider agent="support" persist={{ userId }}>
 *   <Conversations />
 *   <Chat />
 *   <Approval />
 * </AgentProvider>
 * ```
 */
export function AgentProvider({ children, ...props }: AgentProviderProps): ReactElement {
  const given = "client" in props ? props.client : null;
  const options = given === null ? (props as UseAgentOptions) : null;
  const latest = useRef(options);
  latest.current = options;
  const owned = useOwnedClient(options);
  const client = given ?? owned;
  const value = useMemo(
    () => (client === null ? null : { client, options: given === null ? (latest as { readonly current: UseAgentOptions }) : null }),
    [client, given],
  );
  return <AgentContext.Provider value={value}>{children}</AgentContext.Provider>;
}
