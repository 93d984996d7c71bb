/**
 * The AgentClient a component owns (`use-owned.ts`): made from options
 * (`agent-options.ts`), one per `clientKey`. A client disposed while hidden is
 * replaced by a fresh one that resumes the same context.
 */
import type { AgentClient } from "@thinwire/client";
import { useRef } from "react";
import { clientKey, createClient, type UseAgentOptions } from "./agent-options.js";
import { useOwned } from "./use-owned.js";

/** The client of `options`, or null without options (the hooks run all the same). */
export function useOwnedClient(options: UseAgentOptions | null): AgentClient | null {
  const latest = useRef(options);
  latest.current = options;
  const create =
    options === null
      ? null
      : (disposed: AgentClient | null) =>
          createClient(latest as { readonly current: UseAgentOptions }, disposed?.getSnapshot().contextId);
  return useOwned(create, [options === null ? null : clientKey(options)]);
}
