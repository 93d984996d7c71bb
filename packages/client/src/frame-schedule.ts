/**
 * A ready-made `schedule` for AgentClient's notifications: once per animation
 * frame, and with `minNotifyInterval: MIN_FRAME_INTERVAL_MS` at most 60 times
 * a second. `useAgent` commits to React on it; a page without React renders on it.
 */

/**
 * A `minNotifyInterval` for at most 60 notifications a second on any display:
 * animation frames closer than this to the previous notification are skipped
 * (a 120 Hz display notifies every other frame). A little under 1/60 s, so a
 * 60 Hz display's frames, which jitter, all count.
 */
export const MIN_FRAME_INTERVAL_MS = 1000 / 60 - 1;

/** What `nextFrame` reads of the page, spelled out so the types need no DOM library. */
const page = globalThis as {
  document?: { visibilityState?: string };
  requestAnimationFrame?: (callback: () => void) => unknown;
};

/**
 * Runs `flush` on the next animation frame: a `Schedule`. Where there are no
 * frames — no `requestAnimationFrame` (Node.js), or a hidden tab, where
 * browsers pause them — a 16 ms timer (which browsers slow down in the
 * background) keeps the view current instead.
 *
 * ```ts
 * new AgentClient({ agent: "demo", schedule: nextFrame, minNotifyInterval: MIN_FRAME_INTERVAL_MS });
 * ```
 */
export function nextFrame(flush: () => void): void {
  const hidden = page.document?.visibilityState === "hidden";
  if (typeof page.requestAnimationFrame === "function" && !hidden) page.requestAnimationFrame(() => flush());
  else setTimeout(flush, 16);
}
