"use client";
/**
 * A store a component owns — an AgentClient, a ConversationList: made by
 * `create` once per `deps`, started when its effect runs, and disposed when
 * the component lets it go. `useAgent(options)`, `AgentProvider` and
 * `useConversations` own theirs this way; a store passed in is never disposed
 * here.
 *
 * StrictMode and <Activity> run effect cleanups that are not real unmounts.
 * Disposal is therefore deferred by a microtask and cancelled when the effect
 * comes back with the same store; a store that did get disposed while hidden
 * is made again, `create` getting the disposed one (a client resumes its
 * conversation).
 *
 * A store is started once hydrated (`hydrated.ts`): one made by the render
 * that hydrates server HTML, which the next render may replace (a client that
 * reads a stored id now), is not started before.
 */
import { useEffect, useMemo, useRef, useState } from "react";
import { useHydrated } from "./hydrated.js";

export interface Owned {
  start(): unknown;
  dispose(): void;
}

/** The store `create` makes, or null without `create` (the hooks run all the same). */
export function useOwned<T extends Owned>(create: ((disposed: T | null) => T) | null, deps: readonly unknown[]): T | null {
  const latest = useRef(create);
  latest.current = create;
  // The store disposed while hidden, which its replacement takes over from; read once.
  const replaced = useRef<T | null>(null);
  const [revision, setRevision] = useState(0);
  const store = useMemo(() => {
    const make = latest.current;
    const previous = replaced.current;
    replaced.current = null;
    return make === null ? null : make(previous);
    // `create` is read through the ref: `deps` say when a new store is due.
  }, [create === null, ...deps, revision]);

  const hydrated = useHydrated();
  const disposal = useRef<{ store: T; cancelled: boolean; disposed: boolean } | null>(null);
  useEffect(() => {
    if (store === null) return;
    const pending = disposal.current;
    if (pending?.store === store) {
      if (pending.disposed) {
        replaced.current = store;
        setRevision((value) => value + 1);
        return;
      }
      pending.cancelled = true;
    }
    if (hydrated) void store.start();
    return () => {
      const ticket = { store, cancelled: false, disposed: false };
      disposal.current = ticket;
      queueMicrotask(() => {
        if (ticket.cancelled) return;
        ticket.disposed = true;
        store.dispose();
      });
    };
  }, [store, hydrated]);
  return store;
}
