/**
 * Where `@thinwire/react`'s `persist` keeps a user's conversation id: one
 * entry of a `Storage`. Here, without React and without "use client", so
 * server code (a Next.js route, a Server Component) can name the entry too.
 */

/** Where `persist` keeps a user's conversation id for an agent: `thinwire:{agent}:{userId}:contextId`. */
export function contextStorageKey(agent: string, userId: string): string {
  return `thinwire:${agent}:${encodeURIComponent(userId)}:contextId`;
}
