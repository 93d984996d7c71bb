/** nextFrame: the ready-made schedule, once per animation frame, a timer where frames do not come. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import { nextFrame } from "./index.js";
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
