/// <reference types="node" />
/**
 * Cross-language conformance: streams encoded by the Python server (the demo agent's
 * real output, written by `make schema`), reduced by this client, must give the view
 * state the server expects. The streams include a heartbeat, a frame sent twice and a
 * frame type from a future version.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { AgentClient } from "./agent-client.js";
import type { RunRequest } from "./generated/wire.js";

const dir = new URL("./generated/conformance/", import.meta.url);

interface ExpectedRun {
  message: string;
  stream: string;
  contextId: string;
  status: string;
  error: null;
  thinking: string;
  activity: unknown[];
  lastTurns: unknown[];
  result: unknown;
}

const runs = JSON.parse(readFileSync(new URL("demo-runs.json", dir), "utf8")) as ExpectedRun[];

/** The stream as a fetch response, cut into chunks of `size` bytes. */
function response(bytes: Uint8Array, size: number): Response {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < bytes.length; at += size) controller.enqueue(bytes.slice(at, at + size));
      controller.close();
    },
  });
  return new Response(body, {
    headers: { "content-type": "text/event-stream", "Thinwire-Protocol": "1" },
  });
}

describe.each([1, 7, 4096])("the Python demo stream in %i-byte chunks", (size) => {
  it("reduces to the view state the server expects", async () => {
    const requests: RunRequest[] = [];
    let index = 0;
    const fetch = async (_url: RequestInfo | URL, init?: RequestInit) => {
      requests.push(JSON.parse(String(init?.body)) as RunRequest);
      const run = runs[index++]!;
      return response(readFileSync(new URL(run.stream, dir)), size);
    };
    const client = new AgentClient({ agent: "demo", fetch });

    for (const run of runs) {
      const result = await client.send(run.message);
      const { turns, interrupt, title, hasEarlier, ...view } = client.getSnapshot();
      expect(result).toEqual(run.result);
      expect(interrupt).toBeNull();
      expect(title).toBeNull();
      expect(hasEarlier).toBe(false);
      expect(view).toEqual({
        contextId: run.contextId,
        status: run.status,
        error: run.error,
        thinking: run.thinking,
        activity: run.activity,
      });
      // The fields the server expects (a newer recording may expect more of them).
      expect(turns.slice(-2)).toMatchObject(run.lastTurns);
      // The reply shows what the run showed.
      expect(turns.at(-1)).toMatchObject({ thinking: run.thinking, activity: run.activity });
    }
    expect(client.getSnapshot().turns).toHaveLength(2 * runs.length);
    // The second run continued the conversation the first one was given.
    expect(requests.map((request) => request.contextId)).toEqual([undefined, runs[0]!.contextId]);
  });
});
