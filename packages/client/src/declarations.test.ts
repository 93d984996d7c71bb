/// <reference types="node" />
/**
 * The declarations the package ships (`dist/**\/*.d.ts`), emitted in memory as
 * `npm run build` emits them: a Node.js project without the DOM library
 * compiles against them, and they declare nothing internal.
 */
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { emittedDeclarations, nodeProjectErrors } from "./test-helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));

describe("the declarations @thinwire/client ships", () => {
  let declarations: Map<string, string>;
  beforeAll(async () => {
    declarations = await emittedDeclarations(`${root}tsconfig.build.json`);
  }, 60_000); // a build of the package

  it("compile in a Node.js project without the DOM library", { timeout: 30_000 }, async () => {
    const consumer = `
      import { AgentClient, ConversationList, SseTransport, WebSocketTransport } from "./dist/index.js";
      import { fakeFetch, fakeWebSocket, MockTransport, newLog } from "./dist/testing/index.js";
      const client = new AgentClient({ agent: "demo", baseUrl: "http://127.0.0.1:8000", credentials: "include" });
      new ConversationList({ agent: "demo", client, credentials: "same-origin" });
      new SseTransport({ credentials: "omit" });
      const { WebSocket } = fakeWebSocket({ run: () => ({ frames: [] }) }, newLog());
      new WebSocketTransport({ WebSocket });
      new AgentClient({ agent: "demo", baseUrl: "http://127.0.0.1:8000", transport: "websocket", WebSocket });
      void fakeFetch;
      void MockTransport;
    `;
    expect(declarations.size).toBeGreaterThan(10);
    expect(await nodeProjectErrors(`${root}node-consumer.ts`, consumer, declarations)).toEqual([]);
  });

  it("type the frames runFrames builds as RunFrames, each with its seq (no WebSocket-only rejected)", { timeout: 30_000 }, async () => {
    const consumer = `
      import type { RunFrame } from "./dist/index.js";
      import { runFrames } from "./dist/testing/index.js";
      const r = runFrames("ctx-1", "run-1");
      const frames = [r.start(), r.title("Hi"), r.thinking("Hm"), r.call("c1", "f"), r.result("c1", "f"), r.token("Hi"), r.done("Hi")];
      const after: number = 2;
      const resent: RunFrame[] = frames.filter((frame) => frame.seq > after);
      const ids: string[] = [r.interrupt({ interruptId: "i", prompt: "?", options: null, payload: null, decisionSchema: null }), r.error("e", "m")].map((frame) => frame.runId + frame.contextId);
      void [resent, ids];
    `;
    expect(await nodeProjectErrors(`${root}node-consumer.ts`, consumer, declarations)).toEqual([]);
  });

  it("name the types of the options and of a custom transport's answers", { timeout: 30_000 }, async () => {
    const consumer = `
      import type { PersistStorage, StopResult, Transport, TransportStopRequest } from "./dist/index.js";
      const memory = new Map<string, string>();
      const storage: PersistStorage = {
        getItem: (key) => memory.get(key) ?? null,
        setItem: (key, value) => void memory.set(key, value),
        removeItem: (key) => void memory.delete(key),
      };
      const stop: Transport["stop"] = async ({ contextId }: TransportStopRequest): Promise<StopResult> =>
        ({ contextId, runId: null, stopping: false });
      void [storage, stop];
    `;
    expect(await nodeProjectErrors(`${root}node-consumer.ts`, consumer, declarations)).toEqual([]);
  });

  it("take undefined for an option not given, under exactOptionalPropertyTypes", { timeout: 30_000 }, async () => {
    const consumer = `
      import { AgentClient, ConversationList, SseTransport, ThinwireError, WebSocketTransport } from "./dist/index.js";
      declare const env: Record<string, string | undefined>;
      const base = env["AGENT_URL"];
      const client = new AgentClient({
        agent: "demo",
        baseUrl: base,
        contextId: undefined,
        pageSize: undefined,
        transport: undefined,
        fetch: undefined,
        WebSocket: undefined,
        credentials: undefined,
        headers: undefined,
        onContext: undefined,
        onFinish: undefined,
        onError: undefined,
        reconnect: { attempts: undefined, baseDelayMs: undefined, maxDelayMs: undefined },
        schedule: undefined,
        minNotifyInterval: undefined,
      });
      new ConversationList({ agent: "demo", baseUrl: base, pageSize: undefined, headers: undefined, credentials: undefined, fetch: undefined, client: undefined });
      new SseTransport({ fetch: undefined, credentials: undefined });
      new WebSocketTransport({ WebSocket: undefined, url: undefined, fetch: undefined, credentials: undefined });
      new ThinwireError("network_error", "down", { status: undefined, retryable: undefined, cause: undefined, interruptId: undefined });
      void client.send("hi", { data: undefined });
    `;
    const errors = await nodeProjectErrors(`${root}node-consumer.ts`, consumer, declarations, {}, { exactOptionalPropertyTypes: true });
    expect(errors).toEqual([]);
  });

  it("declare no internal glue and no mutable export", () => {
    const texts = [...declarations.values()];
    expect(texts.filter((text) => text.includes("showTitle") || text.includes("listedTitle"))).toEqual([]);
    expect(texts.filter((text) => /export declare (let|var) /.test(text))).toEqual([]);
  });
});
