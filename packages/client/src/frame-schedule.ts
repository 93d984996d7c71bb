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
  document?: {
    visibilityState?: string;
    addEventListener?: (type: "visibilitychange", listener: () => void) => void;
    removeEventListener?: (type: "visibilitychange", listener: () => void) => void;
  };
  requestAnimationFrame?: (callback: () => void) => unknown;
  cancelAnimationFrame?: (handle: unknown) => void;
};

/** The timer that stands in for animation frames where they do not come. */
const HIDDEN_FRAME_MS = 16;

/**
 * Runs `flush` on the next animation frame: a `Schedule`. Where there are no
 * frames — no `requestAnimationFrame` (Node.js), or a hidden tab, where
 * browsers pause them — a 16 ms timer (which browsers slow down in the
 * background) keeps the view current instead. A tab hidden while the frame is
 * pending would hold it until shown again: that frame gives way to the timer.
 * `flush` runs once either way.
 *
 * ```ts
 * new AgentClient({ agent: "demo", schedule: nextFrame, minNotifyInterval: MIN_FRAME_INTERVAL_MS });
 * ```
 */
export function nextFrame(flush: () => void): void {
  const { document } = page;
  if (typeof page.requestAnimationFrame !== "function" || document?.visibilityState === "hidden") {
    setTimeout(flush, HIDDEN_FRAME_MS);
    return;
  }
  const visibility = typeof document?.addEventListener === "function" ? document : null;
  let flushed = false;
  const once = (): void => {
    if (flushed) return;
    flushed = true;
    visibility?.removeEventListener?.("visibilitychange", hidden);
    flush();
  };
  const hidden = (): void => {
    if (visibility?.visibilityState !== "hidden") return;
    // The pending frame will not come until the tab is shown: the timer flushes instead.
    visibility.removeEventListener?.("visibilitychange", hidden);
    page.cancelAnimationFrame?.(frame);
    setTimeout(once, HIDDEN_FRAME_MS);
  };
  const frame = page.requestAnimationFrame(once);
  if (!flushed) visibility?.addEventListener?.("visibilitychange", hidden);
}
