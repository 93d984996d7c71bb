/**
 * Reading an interrupt request off the wire (an `interrupt` frame, a
 * transcript's `pendingInterrupt`): only the fields the protocol defines are
 * kept, and a request without an id or a prompt is no request at all.
 */
import type { InterruptRequest } from "./generated/wire.js";

/** The request as the client keeps it, or null when `value` is not one. */
export function publicInterrupt(value: unknown): InterruptRequest | null {
  if (typeof value !== "object" || value === null) return null;
  const raw = value as Partial<Record<keyof InterruptRequest, unknown>>;
  if (typeof raw.interruptId !== "string" || raw.interruptId === "" || typeof raw.prompt !== "string") return null;
  const options = Array.isArray(raw.options)
    ? raw.options.filter((option): option is string => typeof option === "string")
    : null;
  const schema = raw.decisionSchema;
  return {
    interruptId: raw.interruptId,
    prompt: raw.prompt,
    options,
    payload: raw.payload ?? null,
    decisionSchema:
      typeof schema === "object" && schema !== null && !Array.isArray(schema)
        ? (schema as Record<string, unknown>)
        : null,
  };
}
