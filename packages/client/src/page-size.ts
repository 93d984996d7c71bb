/** The `pageSize` option of an AgentClient and of a ConversationList, checked where each is made. */

/**
 * `pageSize`, or `fallback` when it is not given: a whole number from 1 to
 * `max` the server accepts (or `Infinity`, where `unbounded`: no pages).
 * Anything else is a mistake of the caller's, thrown as a TypeError rather
 * than rounded or clamped into a page size it did not ask for.
 */
export function pageSizeOption(
  pageSize: number | undefined,
  { fallback, max, unbounded = false }: { fallback: number; max: number; unbounded?: boolean },
): number {
  if (pageSize === undefined) return fallback;
  const accepted = Number.isInteger(pageSize) && pageSize >= 1 && pageSize <= max;
  if (accepted || (unbounded && pageSize === Infinity)) return pageSize;
  throw new TypeError(
    `pageSize must be a whole number from 1 to ${max}${unbounded ? ", or Infinity" : ""}, not ${shown(pageSize)}.`,
  );
}

/** A value as a message names it: a string quoted (`"20"` is no number), anything else as JavaScript writes it. */
function shown(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "object" && value !== null) return Array.isArray(value) ? "an array" : "an object";
  if (typeof value === "function") return "a function";
  return String(value);
}
