"use client";
/**
 * The AgentClient a component owns (`use-owned.ts`): made from options
 * (`agent-options.ts`), one per `clientKey`. A client disposed while hidden is
 * replaced by a fresh one that resumes the same context.
 *
 * With `persist`, the stored id is read once hydrated (`hydrated.ts`): the
 * server has no storage, so the render that hydrates its HTML has a client
 * of no conversation, as the server's was, and the next render the client
 * of the stored one. The first is never started: one transcript request.
 */
import type { AgentClient } from "@thinwire/client";
import { useRef } from "react";
import { clientKey, createClient, type UseAgentOptions } from "./agent-options.js";
import { useHydrated } from "./hydrated.js";
import { useOwned } from "./use-owned.js";

/** The client of `options`, or null without options (the hooks run all the same). */
export function useOwnedClient(options: UseAgentOptions | null): AgentClient | null {
  const latest = useRef(options);
  latest.current = options;
  const hydrated = useHydrated();
  const stored = options !== null && options.persist !== undefined && options.contextId === undefined;
  const create =
    options === null
      ? null
      : (disposed: AgentClient | null) =>
          createClient(latest as { readonly current: UseAgentOptions }, disposed?.getSnapshot().contextId, hydrated);
  return useOwned(create, [options === null ? null : clientKey(options), stored && !hydrated]);
}
