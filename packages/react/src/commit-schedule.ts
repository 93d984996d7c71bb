/**
 * When the hook lets React commit a streaming change: once per animation
 * frame, and at most 60 times a second (the client's `schedule` and
 * `minNotifyInterval`).
 */

/**
 * Animation frames closer than this to the previous commit are skipped: at most 60
 * commits a second on any display (a 120 Hz one commits every other frame). A little
 * under 1/60 s, so a 60 Hz display's frames, which jitter, all count.
 */
export const MIN_COMMIT_INTERVAL_MS = 1000 / 60 - 1;

/**
 * Runs `flush` on the next animation frame. Where there are no frames — no
 * `requestAnimationFrame`, or a hidden tab, where browsers pause them — a 16 ms timer
 * (which browsers slow down in the background) keeps the view current instead.
 */
export function nextFrame(flush: () => void): void {
  const hidden = typeof document !== "undefined" && document.visibilityState === "hidden";
  if (typeof requestAnimationFrame === "function" && !hidden) requestAnimationFrame(() => flush());
  else setTimeout(flush, 16);
}
