"use client";
/**
 * Whether the component renders on the client, hydration over: false on the
 * server and in the render that hydrates its HTML, true in every other render
 * (a page rendered on the client alone is true from its first render). What
 * only the browser knows — the id `persist` stored, say — waits for it, so
 * the first render on the client is the one the server made.
 */
import { useSyncExternalStore } from "react";

/** False on the server and while hydrating; React renders again with true once hydrated. */
export function useHydrated(): boolean {
  return useSyncExternalStore(subscribeNever, onClient, onServer);
}

function subscribeNever(): () => void {
  return () => {};
}

function onClient(): boolean {
  return true;
}

function onServer(): boolean {
  return false;
}
