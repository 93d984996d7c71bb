/** The builders of `@thinwire/client/testing`: a run's frames carry their seq, typed so (see also `npm run typecheck`). */
import { describe, expect, it } from "vitest";
import type { RunFrame } from "./index.js";
import { runFrames } from "./testing/index.js";

describe("runFrames", () => {
  it("builds frames with consecutive seqs, each typed with its seq: an attach's filter compiles", () => {
    const r = runFrames("ctx-1", "run-1", 5);
    const frames = [r.start(), r.token("Hi"), r.done("Hi")];
    const resent: RunFrame[] = frames.filter((frame) => frame.seq > 5);
    expect(resent.map((frame) => [frame.seq, frame.type, frame.runId, frame.contextId])).toEqual([
      [6, "token", "run-1", "ctx-1"],
      [7, "done", "run-1", "ctx-1"],
    ]);
  });
});
