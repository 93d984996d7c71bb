/**
 * AgentClient and a stream that went quiet for good — a proxy keeping the
 * stream of a server that died open: the heartbeat watch ends it, and so does
 * a stop the server answers with no run going on; either way the client
 * attaches again and the send settles.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import { SseTransport } from "./sse-transport.js";
import { channel, fakeFetch, newLog, runFrames, type Script, transcriptTurn } from "./testing/index.js";

function setup(script: Script) {
  const log = newLog();
  const fetch = fakeFetch(script, log);
  const client = new AgentClient({ agent: "demo", transport: new SseTransport({ fetch }), fetch });
  let settled: unknown = undefined;
  const statuses: string[] = [];
  client.subscribe(() => {
    const { status } = client.getSnapshot();
    if (statuses.at(-1) !== status) statuses.push(status);
  });
  return { client, log, statuses, settled: () => settled, track: (promise: Promise<unknown>) => promise.then((value) => (settled = value)) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("AgentClient over SSE, when the stream goes quiet for good", () => {
  it("takes a stream silent past twice the heartbeat interval as broken, and attaches again", async () => {
    vi.useFakeTimers();
    const r = runFrames("ctx-1", "run-1");
    const [start, hel, lo, done] = [r.start(), r.token("Hel"), r.token("lo"), r.done("Hello")];
    const quiet = channel(); // nothing after the first two frames, and no end
    const { client, log, statuses, track, settled } = setup({
      run: () => ({ frames: quiet.frames() }),
      attach: () => ({ frames: [lo!, done!] }),
    });
    const sent = track(client.send("hi"));
    quiet.push(start!);
    quiet.push(hel!);
    // Silence shorter than two heartbeats (15 s by default, the server announcing none) is a quiet run.
    await vi.advanceTimersByTimeAsync(29_000);
    expect(log.attaches).toEqual([]);
    expect(client.getSnapshot().status).toBe("streaming");
    await vi.advanceTimersByTimeAsync(1_000 + 250); // the limit, then the first backoff
    expect(log.attaches).toEqual([{ contextId: "ctx-1", after: 2 }]);
    await sent;
    expect(settled()).toMatchObject({ text: "Hello", stopReason: "end" });
    expect(statuses).toEqual(["streaming", "reconnecting", "streaming", "idle"]);
    expect(log.runs).toHaveLength(1);
  });

  it("ends the stream when a stop finds no run going on, and settles the send from what the server kept", async () => {
    vi.useFakeTimers();
    const r = runFrames("ctx-1", "run-1");
    const quiet = channel();
    const { client, log, statuses, track, settled } = setup({
      run: () => ({ frames: quiet.frames() }),
      // The server that came back has no run: the one it restarted from ended, interrupted.
      stop: (contextId) => ({ contextId, runId: null, stopping: false }),
      attach: () => ({ nothing: true }),
      transcript: (contextId) => ({
        contextId,
        agent: "demo",
        title: null,
        turns: [transcriptTurn("user", "hi"), transcriptTurn("assistant", "Hel", { stopReason: "interrupted" })],
        activeRunId: null,
        pendingInterrupt: null,
        hasEarlier: false,
      }),
    });
    const sent = track(client.send("hi"));
    quiet.push(r.start());
    quiet.push(r.token("Hel"));
    await vi.advanceTimersByTimeAsync(0);
    await client.stop();
    await vi.advanceTimersByTimeAsync(250); // the first backoff: well within the heartbeat's limit
    await sent;
    expect(log.stops).toEqual(["ctx-1"]);
    expect(log.attaches).toEqual([{ contextId: "ctx-1", after: 2 }]);
    expect(settled()).toMatchObject({ text: "Hel", stopReason: "interrupted" });
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "Hel", streaming: false, stopReason: "interrupted" });
    expect(statuses).toEqual(["streaming", "reconnecting", "idle"]);
  });

  it("keeps reading when the stop is under way", async () => {
    const r = runFrames("ctx-1", "run-1");
    const stream = channel();
    const { client, log } = setup({
      run: () => ({ frames: stream.frames() }),
      stop: (contextId) => {
        stream.push(r.done("Hal", [], "stopped"));
        stream.end();
        return { contextId, runId: "run-1", stopping: true };
      },
    });
    const sent = client.send("Count to a million");
    stream.push(r.start());
    stream.push(r.token("Hal"));
    await vi.waitFor(() => expect(client.getSnapshot().turns[1]?.text).toBe("Hal"));
    await client.stop();
    expect(await sent).toMatchObject({ text: "Hal", stopReason: "stopped" });
    expect(log.attaches).toEqual([]);
  });
});
