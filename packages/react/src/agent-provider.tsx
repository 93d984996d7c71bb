/**
 * AgentProvider: one conversation shared by every component below it. It owns
 * one AgentClient made from the options `useAgent` takes (and disposes it when
 * it unmounts), or shares a `client` you made (which stays yours); `useAgent()`
 * with no options binds to it.
 */
import type { AgentClient } from "@thinwire/client";
import { createContext, type ReactElement, type ReactNode } from "react";
import type { UseAgentOptions } from "./agent-options.js";
import { useOwnedClient } from "./use-owned-client.js";

/** The client of the nearest AgentProvider. */
export const AgentContext = createContext<AgentClient | null>(null);

export type AgentProviderProps = (UseAgentOptions | { client: AgentClient }) & { children?: ReactNode };

/**
 * Shares one conversation with the components below it: a chat, a sidebar and
 * an approval card that call `useAgent()` see the same snapshot. Takes the
 * options of `useAgent(options)`, or `client` (an AgentClient you made, which
 * stays yours to dispose).
 *
 * ```tsx
 * <AgentProvider agent="support" persist={{ userId }}>
 *   <Chat />
 *   <Approval />
 * </AgentProvider>
 * ```
 */
export function AgentProvider({ children, ...props }: AgentProviderProps): ReactElement {
  const given = "client" in props ? props.client : null;
  const owned = useOwnedClient(given === null ? (props as UseAgentOptions) : null);
  return <AgentContext.Provider value={given ?? owned}>{children}</AgentContext.Provider>;
}
