/**
 * The idempotency key of a send (`messageId`): new for every message, the same
 * for every try of it, so a server that already took the first try streams that
 * try's run instead of starting a second one.
 *
 * 128 random bits from the platform's cryptographic generator — a UUID where
 * `crypto.randomUUID` exists (secure contexts), else 32 hex digits from
 * `crypto.getRandomValues`. Never `Math.random`: two tabs, or two clients of
 * one principal, must not mint the same id. Both forms match the wire pattern
 * `^[A-Za-z0-9_.:-]{8,64}$`.
 */
export function newMessageId(): string | null {
  const crypto = (globalThis as { crypto?: Partial<Crypto> }).crypto;
  if (typeof crypto?.randomUUID === "function") return crypto.randomUUID();
  if (typeof crypto?.getRandomValues === "function") {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
  }
  // No cryptographic randomness at all: the send goes without a key, and is not repeated.
  return null;
}
