export const DEMO_USERS = ["alice", "bob", "carol"] as const;
export type DemoUser = (typeof DEMO_USERS)[number];

export function isDemoUser(value: unknown): value is DemoUser {
  return typeof value === "string" && (DEMO_USERS as readonly string[]).includes(value);
}

/** Initial user from the `?user=` query parameter, falling back to alice. */
export function initialUser(search: string = window.location.search): DemoUser {
  const fromQuery = new URLSearchParams(search).get("user");
  return isDemoUser(fromQuery) ? fromQuery : "alice";
}

/** Reflect the chosen user in the address bar (no storage involved). */
export function reflectUserInUrl(user: DemoUser): void {
  const url = new URL(window.location.href);
  if (url.searchParams.get("user") === user) return;
  url.searchParams.set("user", user);
  window.history.replaceState(window.history.state, "", url);
}
