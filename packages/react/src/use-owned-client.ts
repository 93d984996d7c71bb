/**
 * The AgentClient a component owns: made from options (`agent-options.ts`),
 * one per `clientKey`, started when its effect runs and disposed when the
 * component lets it go. `useAgent(options)` and `AgentProvider` own theirs
 * this way; a client passed in is never disposed here.
 *
 * StrictMode and <Activity> run effect cleanups that are not real unmounts.
 * Disposal is therefore deferred by a microtask and cancelled when the effect
 * comes back with the same client; a client that did get disposed while hidden
 * is replaced by a fresh one that resumes the same context.
 */
import type { AgentClient } from "@thinwire/client";
import { useEffect, useMemo, useRef, useState } from "react";
import { clientKey, createClient, type UseAgentOptions } from "./agent-options.js";

/** The client of `options`, or null without options (the hooks run all the same). */
export function useOwnedClient(options: UseAgentOptions | null): AgentClient | null {
  const latest = useRef(options);
  latest.current = options;
  const key = options === null ? null : clientKey(options);
  // The context a replacement for a client disposed while hidden resumes; read once.
  const resume = useRef<string | null | undefined>(undefined);
  const [revision, setRevision] = useState(0);
  const client = useMemo(() => {
    if (latest.current === null) return null;
    const contextId = resume.current;
    resume.current = undefined;
    return createClient(latest as { readonly current: UseAgentOptions }, contextId);
  }, [key, revision]);

  const disposal = useRef<{ client: AgentClient; cancelled: boolean; disposed: boolean } | null>(null);
  useEffect(() => {
    if (client === null) return;
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
