/** nextFrame: the ready-made schedule, once per animation frame, a timer where frames do not come. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import { nextFrame } from "./index.js";
import { Notifier } from "./notifier.js";
import { channel, MockTransport, runFrames } from "./testing/index.js";

afterEach(() => {
  vi.unstubAllGlobals();
  vi.useRealTimers();
});

describe("nextFrame", () => {
  it("flushes on the next animation frame", () => {
    const frames: Array<() => void> = [];
    vi.stubGlobal("requestAnimationFrame", (callback: () => void) => frames.push(callback));
    const flush = vi.fn();
    nextFrame(flush);
    expect(flush).not.toHaveBeenCalled();
    expect(frames).toHaveLength(1);
    frames[0]!();
    expect(flush).toHaveBeenCalledOnce();
  });

  it("flushes on a 16 ms timer in a hidden tab, whose frames are paused, and where there are no frames (Node.js)", () => {
    vi.useFakeTimers();
    const requestAnimationFrame = vi.fn();
    vi.stubGlobal("requestAnimationFrame", requestAnimationFrame);
    vi.stubGlobal("document", { visibilityState: "hidden" });
    const hidden = vi.fn();
    nextFrame(hidden);
    vi.advanceTimersByTime(15);
    expect(hidden).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(hidden).toHaveBeenCalledOnce();
    expect(requestAnimationFrame).not.toHaveBeenCalled();

    vi.unstubAllGlobals(); // Node.js: no document, no requestAnimationFrame
    const node = vi.fn();
    nextFrame(node);
    vi.advanceTimersByTime(16);
    expect(node).toHaveBeenCalledOnce();
  });

  describe("a tab hidden while a frame is pending", () => {
    /**
     * A page whose animation frames, as Chromium's, do not come while it is
     * hidden: a frame asked for is held until the page is shown again.
     */
    function hidingPage() {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
      const frames = new Map<number, () => void>();
      const listeners = new Set<() => void>();
      let handles = 0;
      const document = {
        visibilityState: "visible",
        addEventListener: (type: string, listener: () => void) => {
          if (type === "visibilitychange") listeners.add(listener);
        },
        removeEventListener: (type: string, listener: () => void) => {
          if (type === "visibilitychange") listeners.delete(listener);
        },
      };
      vi.stubGlobal("document", document);
      vi.stubGlobal("requestAnimationFrame", (callback: () => void) => {
        frames.set(++handles, callback);
        return handles;
      });
      vi.stubGlobal("cancelAnimationFrame", (handle: number) => frames.delete(handle));
      return {
        listeners,
        /** The frames asked for and neither run nor cancelled. */
        get pending() {
          return frames.size;
        },
        /** The display's next frame: the pending ones run, unless the page is hidden. */
        frame() {
          if (document.visibilityState === "hidden") return;
          const due = [...frames.values()];
          frames.clear();
          for (const callback of due) callback();
        },
        show(state: "visible" | "hidden") {
          document.visibilityState = state;
          for (const listener of [...listeners]) listener();
        },
      };
    }

    it("flushes on the 16 ms timer instead of the frame, once, leaving no listener", () => {
      const page = hidingPage();
      const flush = vi.fn();
      nextFrame(flush);
      expect(page.listeners.size).toBe(1);
      page.show("hidden");
      page.frame(); // paused
      vi.advanceTimersByTime(15);
      expect(flush).not.toHaveBeenCalled();
      vi.advanceTimersByTime(1);
      expect(flush).toHaveBeenCalledOnce();
      expect(page.listeners.size).toBe(0);
      page.show("visible");
      page.frame();
      vi.advanceTimersByTime(100);
      expect(flush).toHaveBeenCalledOnce();
      expect(page.pending).toBe(0);
    });

    it("flushes on the frame when it comes first, and watches the page no more", () => {
      const page = hidingPage();
      const flush = vi.fn();
      nextFrame(flush);
      page.frame();
      expect(flush).toHaveBeenCalledOnce();
      expect(page.listeners.size).toBe(0);
      page.show("hidden");
      vi.advanceTimersByTime(100);
      expect(flush).toHaveBeenCalledOnce();
    });

    it("flushes once where frames cannot be cancelled, whichever of frame and timer comes first", () => {
      const page = hidingPage();
      vi.stubGlobal("cancelAnimationFrame", undefined);
      const late = vi.fn();
      nextFrame(late);
      page.show("hidden");
      vi.advanceTimersByTime(16);
      page.show("visible");
      page.frame(); // the held frame comes after all
      expect(late).toHaveBeenCalledOnce();

      const early = vi.fn();
      nextFrame(early);
      page.show("hidden");
      page.show("visible");
      page.frame(); // shown again before the timer
      vi.advanceTimersByTime(100);
      expect(early).toHaveBeenCalledOnce();
      expect(page.listeners.size).toBe(0);
    });

    it("keeps a Notifier's batches coming while the tab stays hidden", () => {
      const page = hidingPage();
      const notifier = new Notifier(nextFrame);
      const heard = vi.fn();
      notifier.subscribe(heard);
      notifier.changed(true); // a token: a frame is asked for
      page.show("hidden");
      notifier.changed(true); // tokens while hidden
      vi.advanceTimersByTime(16);
      expect(heard).toHaveBeenCalledTimes(1);
      notifier.changed(true);
      vi.advanceTimersByTime(16);
      expect(heard).toHaveBeenCalledTimes(2);
      expect(page.listeners.size).toBe(0);
    });
  });

  it("makes a bare AgentClient notify once per frame, not once per frame of the run", async () => {
    const frames: Array<() => void> = [];
    vi.stubGlobal("requestAnimationFrame", (callback: () => void) => frames.push(callback));
    const stream = channel();
    const client = new AgentClient({
      agent: "demo",
      transport: new MockTransport(() => stream.frames()),
      schedule: nextFrame,
    });
    const seen: string[] = [];
    client.subscribe(() => seen.push(`${client.getSnapshot().status}:${client.getSnapshot().turns[1]?.text ?? ""}`));
    const r = runFrames("ctx-1", "run-1");
    const sent = client.send("hi");
    stream.push(r.start());
    for (const word of ["a", "b", "c", "d", "e"]) stream.push(r.token(word));
    while (client.getSnapshot().turns[1]?.text !== "abcde") await new Promise((resolve) => setTimeout(resolve, 0));
    expect(frames).toHaveLength(1); // one frame asked for the burst
    frames.shift()!();
    stream.push(r.done("abcde"));
    await sent;
    expect(seen).toEqual(["streaming:", "streaming:abcde", "idle:abcde"]);
    client.dispose();
  });
});
