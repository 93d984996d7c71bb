import type { DemoUser } from "./users";

/**
 * Signs the browser in as a demo user: the server answers with a signed, HttpOnly
 * cookie, and from then on every request acts for that user. This is the demo's own
 * stand-in for real authentication; the hook knows nothing about it.
 */
export async function signIn(user: DemoUser): Promise<void> {
  const response = await fetch("/demo/login", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ user }),
    credentials: "same-origin",
  });
  if (!response.ok) throw new Error(`Could not sign in as ${user} (HTTP ${response.status}).`);
}
