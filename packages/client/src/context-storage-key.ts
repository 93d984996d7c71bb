/**
 * Where `@thinwire/react`'s `persist` keeps a user's conversation id: one
 * entry of a `Storage`, of the type here. Here, without React and without
 * "use client", so server code (a Next.js route, a Server Component) can name
 * the entry too.
 */

/** Where `persist` keeps a user's conversation id for an agent: `thinwire:{agent}:{userId}:contextId`. */
export function contextStorageKey(agent: string, userId: string): string {
  return `thinwire:${agent}:${encodeURIComponent(userId)}:contextId`;
}

/**
 * What `persist` needs of a storage: `localStorage`, `sessionStorage`, or any
 * object with these methods. Spelled out rather than the DOM's `Storage`, so
 * the types need no DOM library.
 */
export interface PersistStorage {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}
