/** AgentClient over a MockTransport: sending, hydration, reset and dispose, transports, reconnect, stop, batching, decisions. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import { ThinwireError } from "./errors.js";
import type { Frame, InterruptRequest, Transcript, TurnAsked } from "./generated/wire.js";
import { channel, fakeWebSocket, MockTransport, newLog, runFrames as run, transcriptTurn } from "./testing/index.js";
import type { Transport, TransportRunRequest } from "./transport.js";
import { WebSocketTransport } from "./websocket-transport.js";
import { rejection } from "./test-helpers.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);
const CTX_7 = "ctx-" + "7".repeat(36);

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

describe("AgentClient.send", () => {
  it("streams a whole run into the snapshot and resolves with the result", async () => {
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => [
      r.start({ turnId: "turn-a2", userTurnId: "turn-u1" }),
      r.thinking("Checking "),
      r.thinking("the sky."),
      r.call("c1", "weather"),
      r.result("c1", "weather"),
      r.token("Sun"),
      r.token("ny."),
      r.done("Sunny.", ["weather"]),
    ]);
    const onContext = vi.fn();
    const client = new AgentClient({
      agent: "demo bot",
      baseUrl: "https://api.test/tw/",
      transport,
      headers: { authorization: "Bearer t" },
      onContext,
    });
    const listener = vi.fn();
    client.subscribe(listener);

    const result = await client.send("Weather?");

    expect(result).toEqual({
      text: "Sunny.",
      toolCalls: ["weather"],
      contextId: "ctx-1",
      runId: "run-1",
      stopReason: "end",
    });
    const request = transport.requests[0]!;
    expect(request).toMatchObject({ baseUrl: "https://api.test/tw", agent: "demo bot" });
    expect(request.body).toEqual({ messageId: expect.any(String), message: { text: "Weather?" } });
    expect(request.headers).toEqual({ authorization: "Bearer t", "Thinwire-Protocol": "1" });
    expect(onContext.mock.calls).toEqual([["ctx-1"]]);
    // one notification for the optimistic turns, then one per frame
    expect(listener).toHaveBeenCalledTimes(1 + 8);
    const snapshot = client.getSnapshot();
    expect(snapshot).toEqual({
      contextId: "ctx-1",
      status: "idle",
      error: null,
      interrupt: null,
      thinking: "Checking the sky.",
      activity: [{ callId: "c1", name: "weather", state: "ok" }],
      title: null,
      hasEarlier: false,
      turns: [
        {
          id: "turn-u1",
          role: "user",
          text: "Weather?",
          toolCalls: [],
          streaming: false,
          stopReason: null,
          thinking: "",
          activity: [],
          meta: { startedAt: null, finishedAt: null, model: null, usage: null },
          asked: null,
          siblings: 1,
          siblingIndex: 0,
        },
        {
          id: "turn-a2",
          role: "assistant",
          text: "Sunny.",
          toolCalls: ["weather"],
          streaming: false,
          stopReason: "end",
          thinking: "Checking the sky.",
          activity: [{ callId: "c1", name: "weather", state: "ok" }],
          meta: { startedAt: null, finishedAt: null, model: null, usage: null },
          asked: null,
          siblings: 1,
          siblingIndex: 0,
        },
      ],
    });
    expect(client.getSnapshot()).toBe(snapshot);
  });

  it("shows the reply while it streams, with a new snapshot per frame", async () => {
    const stream = channel();
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(() => stream.frames()) });
    const r = run("ctx-1", "run-1");
    const sent = client.send("Hi");
    expect(client.getSnapshot().status).toBe("streaming");
    expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.streaming])).toEqual([
      ["user", "Hi", false],
      ["assistant", "", true],
    ]);
    stream.push(r.start());
    stream.push(r.token("Hel"));
    await tick();
    const partial = client.getSnapshot();
    expect(partial.turns[1]?.text).toBe("Hel");
    stream.push(r.call("c1", "search"));
    await tick();
    expect(client.getSnapshot().activity).toEqual([{ callId: "c1", name: "search", state: "running" }]);
    expect(partial.activity).toEqual([]);
    stream.push(r.result("c1", "search", false));
    stream.push(r.token("lo"));
    await tick();
    expect(client.getSnapshot().activity[0]?.state).toBe("error");
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "Hello", streaming: true });
    // As hook.md says: a new snapshot, new arrays where they changed, the same ones where not.
    const before = client.getSnapshot();
    stream.push(r.token("!"));
    await tick();
    const after = client.getSnapshot();
    expect(after).not.toBe(before);
    expect(after.turns).not.toBe(before.turns);
    expect(after.turns[1]).not.toBe(before.turns[1]);
    expect(after.turns[0]).toBe(before.turns[0]);
    expect(after.activity).toBe(before.activity);
    stream.push(r.done("Hello!", ["search"]));
    await sent;
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "Hello!", streaming: false, toolCalls: ["search"] });
  });

  it("reads the stream to its end after done instead of cancelling the request", async () => {
    const stream = channel();
    let finished: "ended" | "cancelled" | null = null;
    async function* frames(): AsyncGenerator<Frame> {
      let ended = false;
      try {
        yield* stream.frames();
        ended = true;
      } finally {
        finished = ended ? "ended" : "cancelled";
      }
    }
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(() => frames()) });
    const r = run("ctx-1", "run-1");
    const sent = client.send("Hi");
    stream.push(r.start());
    stream.push(r.done("Hello"));
    expect((await sent).text).toBe("Hello");
    expect(finished).toBeNull();
    stream.end();
    await tick();
    expect(finished).toBe("ended");
  });

  it("continues the conversation with the context id and clears the last run's view", async () => {
    let count = 0;
    const transport = new MockTransport(() => {
      const r = run("ctx-1", `run-${++count}`, count * 10);
      return [r.start(), r.thinking("hmm"), r.call("c", "t"), r.result("c", "t"), r.done(`reply ${count}`, ["t"])];
    });
    const onContext = vi.fn();
    const client = new AgentClient({ agent: "demo", transport, onContext });
    await client.send("one");
    const second = client.send("two");
    expect(client.getSnapshot().thinking).toBe("");
    expect(client.getSnapshot().activity).toEqual([]);
    await second;
    expect(transport.requests[1]!.body).toEqual({
      contextId: "ctx-1",
      messageId: expect.any(String),
      message: { text: "two" },
    });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["one", "reply 1", "two", "reply 2"]);
    expect(new Set(client.getSnapshot().turns.map((turn) => turn.id)).size).toBe(4);
    expect(onContext).toHaveBeenCalledTimes(1);
  });

  it("drops frames whose seq was already seen", async () => {
    const r = run("ctx-1", "run-1");
    const start = r.start();
    const hello = r.token("Hello");
    const world = r.token(" world");
    const transport = new MockTransport(() => [start, hello, hello, start, world, hello, world, r.done("Hello world")]);
    const client = new AgentClient({ agent: "demo", transport });
    const seen: string[] = [];
    client.subscribe(() => seen.push(client.getSnapshot().turns[1]?.text ?? ""));
    await client.send("hi");
    expect(seen).toEqual(["", "", "Hello", "Hello world", "Hello world"]);
  });

  it("ignores unknown frame types and frames of other runs", async () => {
    const r = run("ctx-1", "run-1");
    const stranger = run("ctx-1", "run-0", 100);
    const unknown = { contextId: "ctx-1", runId: "run-1", seq: 50, type: "telemetry", cpu: 3 } as unknown as Frame;
    const transport = new MockTransport(() => [
      r.start(),
      unknown,
      stranger.token("intruder"),
      r.token("ok"),
      r.done("ok"),
    ]);
    const client = new AgentClient({ agent: "demo", transport });
    const listener = vi.fn();
    client.subscribe(listener);
    await client.send("hi");
    expect(client.getSnapshot().turns[1]?.text).toBe("ok");
    expect(listener).toHaveBeenCalledTimes(1 + 3);
  });

  it("rejects an HTTP error with the typed error and leaves no trace of the request", async () => {
    const transport = new MockTransport(() => {
      throw new ThinwireError("message_too_large", "Too long.", { status: 413 });
    });
    const client = new AgentClient({ agent: "demo", transport, contextId: "ctx-1" });
    const error = await rejection(client.send("x".repeat(10)));
    expect(error).toMatchObject({ code: "message_too_large", status: 413, retryable: false });
    expect(client.getSnapshot()).toMatchObject({
      status: "error",
      turns: [],
      contextId: "ctx-1",
      error: { code: "message_too_large", message: "Too long.", retryable: false },
    });
  });

  it("resolves a run that failed on the server with stop reason error", async () => {
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => [r.start(), r.error("agent_crashed", "The agent failed."), r.done("", [], "error")]);
    const client = new AgentClient({ agent: "demo", transport });
    const result = await client.send("hi");
    expect(result.stopReason).toBe("error");
    expect(client.getSnapshot().status).toBe("error");
    expect(client.getSnapshot().error).toEqual({ code: "agent_crashed", message: "The agent failed.", retryable: false });
  });

  it("rejects with stream_interrupted when the stream ends before done and reconnecting is off", async () => {
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => [r.start(), r.token("Half a rep")]);
    const client = new AgentClient({ agent: "demo", transport, reconnect: { attempts: 0 } });
    const error = await rejection(client.send("hi"));
    expect(error.code).toBe("stream_interrupted");
    expect(error.retryable).toBe(true);
    const snapshot = client.getSnapshot();
    expect(snapshot.status).toBe("error");
    expect(snapshot.error?.code).toBe("stream_interrupted");
    expect(snapshot.contextId).toBe("ctx-1");
    expect(snapshot.turns.map((turn) => [turn.text, turn.streaming])).toEqual([
      ["hi", false],
      ["Half a rep", false],
    ]);
  });

  it("wraps a transport failure as a retryable network error", async () => {
    const transport = new MockTransport(() => {
      throw new TypeError("Failed to fetch");
    });
    // Not sent again here (see "AgentClient send retry").
    const client = new AgentClient({ agent: "demo", transport, reconnect: { attempts: 0 } });
    const error = await rejection(client.send("hi"));
    expect(error).toMatchObject({ code: "network_error", retryable: true });
    expect(client.getSnapshot().error?.code).toBe("network_error");
  });

  it("rejects empty text and a second concurrent send without a request", async () => {
    const stream = channel();
    const transport = new MockTransport(() => stream.frames());
    const client = new AgentClient({ agent: "demo", transport });
    expect((await rejection(client.send("   \n"))).code).toBe("invalid_request");
    expect(transport.requests).toHaveLength(0);
    expect(client.getSnapshot().turns).toEqual([]);

    const first = client.send("one");
    const busy = await rejection(client.send("two"));
    expect(busy.code).toBe("context_busy");
    expect(client.getSnapshot().turns.filter((turn) => turn.role === "user")).toHaveLength(1);
    const r = run("ctx-1", "run-1");
    stream.push(r.start());
    stream.push(r.done("ok"));
    await first;
    await tick();
    expect(transport.requests).toHaveLength(1);
  });
});

/** What a turn shows when nothing said more: no thinking, no tools, no meta, no alternatives. */
const NO_TURN_DETAIL = {
  thinking: "",
  activity: [],
  meta: { startedAt: null, finishedAt: null, model: null, usage: null },
  asked: null,
  siblings: 1,
  siblingIndex: 0,
};

describe("AgentClient.start (hydration)", () => {
  const transcript = {
    contextId: "ctx-7",
    agent: "demo",
    turns: [
      { role: "user", text: "Hello", toolCalls: [], stopReason: null },
      { role: "assistant", text: "Hi there", toolCalls: ["greet"], stopReason: "interrupted", internalNote: "ignored" },
    ],
  };

  it("loads the transcript of a resumed conversation", async () => {
    const fetch = vi.fn(async (..._args: Parameters<typeof globalThis.fetch>) => jsonResponse(200, transcript));
    const client = new AgentClient({ agent: "demo", baseUrl: "/api", contextId: CTX_7, fetch });
    const started = client.start();
    expect(client.getSnapshot().status).toBe("hydrating");
    expect(client.start()).toBe(started);
    await started;
    expect(fetch).toHaveBeenCalledTimes(1);
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe(`/api/agents/demo/contexts/${CTX_7}?limit=50`);
    expect(new Headers(init?.headers).get("Thinwire-Protocol")).toBe("1");
    expect(client.getSnapshot()).toEqual({
      contextId: CTX_7,
      status: "idle",
      error: null,
      interrupt: null,
      thinking: "",
      activity: [],
      title: null,
      // An older server's transcript: whole (no hasEarlier), no ids, nothing per turn but the text and the tools.
      hasEarlier: false,
      turns: [
        { ...NO_TURN_DETAIL, id: expect.any(String), role: "user", text: "Hello", toolCalls: [], streaming: false, stopReason: null },
        {
          ...NO_TURN_DETAIL,
          id: expect.any(String),
          role: "assistant",
          text: "Hi there",
          toolCalls: ["greet"],
          streaming: false,
          stopReason: "interrupted",
        },
      ],
    });
  });

  it("shows a transcript's ids, title, and each turn's thinking, activity, meta and alternatives", async () => {
    const meta = { startedAt: 1_700_000_000.5, finishedAt: 1_700_000_003, model: "demo-1", usage: { inputTokens: 12, outputTokens: 30 } };
    const body: Transcript = {
      contextId: CTX_7,
      agent: "demo",
      title: "Weather talk",
      turns: [
        transcriptTurn("user", "Weather?", { id: "turn-u1", siblings: 2, siblingIndex: 1, meta: { ...meta, model: null, usage: null } }),
        transcriptTurn("assistant", "Sunny.", {
          id: "turn-a2",
          toolCalls: ["weather", "radar"],
          thinking: "Checking the sky.",
          activity: [
            { callId: "c1", name: "weather", ok: true },
            { callId: "c2", name: "radar", ok: false },
            { callId: "c3", name: "satellite", ok: null },
          ],
          meta,
          siblings: 2,
          siblingIndex: 1,
        }),
      ],
      activeRunId: null,
      pendingInterrupt: null,
      hasEarlier: false,
    };
    const client = new AgentClient({ agent: "demo", contextId: CTX_7, fetch: async () => jsonResponse(200, body) });
    await client.start();
    const { turns, title, thinking, activity } = client.getSnapshot();
    expect({ title, thinking, activity }).toEqual({ title: "Weather talk", thinking: "", activity: [] });
    expect(turns).toEqual([
      {
        id: "turn-u1",
        role: "user",
        text: "Weather?",
        toolCalls: [],
        streaming: false,
        stopReason: null,
        thinking: "",
        activity: [],
        meta: { ...meta, model: null, usage: null },
        asked: null,
        siblings: 2,
        siblingIndex: 1,
      },
      {
        id: "turn-a2",
        role: "assistant",
        text: "Sunny.",
        toolCalls: ["weather", "radar"],
        streaming: false,
        stopReason: "end",
        thinking: "Checking the sky.",
        activity: [
          { callId: "c1", name: "weather", state: "ok" },
          { callId: "c2", name: "radar", state: "error" },
          { callId: "c3", name: "satellite", state: "running" },
        ],
        meta,
        asked: null,
        siblings: 2,
        siblingIndex: 1,
      },
    ]);
  });

  it("does nothing without a context id", async () => {
    const fetch = vi.fn();
    const client = new AgentClient({ agent: "demo", fetch });
    const before = client.getSnapshot();
    await client.start();
    expect(fetch).not.toHaveBeenCalled();
    expect(client.getSnapshot()).toBe(before);
  });

  it("forgets an id the server does not know, quietly", async () => {
    const fetch = vi.fn(async () =>
      jsonResponse(404, { error: { code: "context_not_found", message: "No such context." } }),
    );
    const onContext = vi.fn();
    const client = new AgentClient({ agent: "demo", contextId: "ctx-" + "9".repeat(36), fetch, onContext });
    await client.start();
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(client.getSnapshot()).toMatchObject({ contextId: null, status: "idle", error: null, turns: [] });
    expect(onContext.mock.calls).toEqual([[null]]);
  });

  it.each(["ctx-2f77…", "not-an-id", "ctx-" + "A".repeat(36), "ctx-" + "0".repeat(35)])(
    "forgets the malformed id %j quietly, without a request, and sends in a new conversation",
    async (malformed) => {
      const fetch = vi.fn();
      const r = run("ctx-" + "1".repeat(36), "run-1");
      const transport = new MockTransport(() => [r.start(), r.title("Hello"), r.done("Hi")]);
      const onContext = vi.fn();
      const onError = vi.fn();
      const client = new AgentClient({ agent: "demo", contextId: malformed, fetch, transport, onContext, onError });
      await client.start();
      expect(fetch).not.toHaveBeenCalled();
      expect(client.getSnapshot()).toMatchObject({ contextId: null, status: "idle", error: null, turns: [] });
      expect(onContext.mock.calls).toEqual([[null]]);
      expect((await client.send("Hello")).text).toBe("Hi");
      expect(transport.requests[0]!.body.contextId).toBeUndefined();
      expect(onError).not.toHaveBeenCalled();
    },
  );

  it("forgets an id the server calls invalid (invalid_context_id), quietly", async () => {
    const fetch = vi.fn(async () =>
      jsonResponse(400, { error: { code: "invalid_context_id", message: "A context id is 'ctx-' followed by 36 lowercase hex digits." } }),
    );
    const onContext = vi.fn();
    const onError = vi.fn();
    const client = new AgentClient({ agent: "demo", contextId: "ctx-" + "9".repeat(36), fetch, onContext, onError });
    await client.start();
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(client.getSnapshot()).toMatchObject({ contextId: null, status: "idle", error: null, turns: [] });
    expect(onContext.mock.calls).toEqual([[null]]);
    expect(onError).not.toHaveBeenCalled();
  });

  it("shows other failures as an error", async () => {
    const fetch = vi.fn(async () => new Response("<html>bad gateway</html>", { status: 502 }));
    const onContext = vi.fn();
    const client = new AgentClient({ agent: "demo", contextId: CTX_7, fetch, onContext, reconnect: { attempts: 0 } });
    await client.start();
    expect(client.getSnapshot()).toMatchObject({
      contextId: CTX_7,
      status: "error",
      error: { code: "http_error", retryable: true },
    });
    expect(onContext).not.toHaveBeenCalled();
  });

  it("lets a send wait for the hydration it would otherwise race", async () => {
    let answer!: (response: Response) => void;
    const fetch = vi.fn(() => new Promise<Response>((resolve) => (answer = resolve)));
    const r = run(CTX_7, "run-2", 40);
    const transport = new MockTransport(() => [r.start({ afterTurnId: "turn-a2" }), r.done("Again")]);
    const client = new AgentClient({ agent: "demo", contextId: CTX_7, fetch, transport });
    void client.start();
    const sent = client.send("More");
    await tick();
    expect(transport.requests).toHaveLength(0);
    const [hello, hi] = transcript.turns;
    answer(jsonResponse(200, { ...transcript, title: "Hello", turns: [{ ...hello, id: "turn-u1" }, { ...hi, id: "turn-a2" }] }));
    await sent;
    expect(transport.requests[0]!.body.contextId).toBe(CTX_7);
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["Hello", "Hi there", "More", "Again"]);
  });
});

describe("AgentClient.reset and dispose", () => {
  it("reset aborts the run in flight and starts an empty conversation", async () => {
    const stream = channel();
    let signal: AbortSignal | undefined;
    const transport = new MockTransport((request: TransportRunRequest) => {
      signal = request.signal;
      return stream.frames();
    });
    const onContext = vi.fn();
    const client = new AgentClient({ agent: "demo", transport, onContext });
    const r = run("ctx-1", "run-1");
    const sent = client.send("hi");
    stream.push(r.start());
    stream.push(r.thinking("hmm"));
    await tick();
    expect(client.getSnapshot().contextId).toBe("ctx-1");

    client.reset();
    expect(signal?.aborted).toBe(true);
    expect(client.getSnapshot()).toEqual({
      contextId: null,
      status: "idle",
      error: null,
      interrupt: null,
      thinking: "",
      activity: [],
      turns: [],
      title: null,
      hasEarlier: false,
    });
    expect(onContext.mock.calls).toEqual([["ctx-1"], [null]]);
    stream.push(r.token("late"));
    expect((await rejection(sent)).code).toBe("aborted");
    expect(client.getSnapshot().turns).toEqual([]);
    expect(client.getSnapshot().status).toBe("idle");
  });

  it("reset settles a send even when the transport ignores the signal", async () => {
    const transport: Transport = {
      async *run() {
        await new Promise(() => undefined); // never yields, never looks at the signal
      },
      async *attach() {},
      async *decide() {},
      async *regenerate() {},
      async *edit() {},
      async stop() {},
    };
    const client = new AgentClient({ agent: "demo", transport });
    const sent = client.send("hi");
    await tick();
    client.reset();
    expect((await rejection(sent)).code).toBe("aborted");
    expect(client.getSnapshot().turns).toEqual([]);
  });

  it("reset starts a new context on the next send", async () => {
    let count = 0;
    const transport = new MockTransport(() => {
      count += 1;
      const r = run(`ctx-${count}`, `run-${count}`);
      return [r.start(), r.done("ok")];
    });
    const client = new AgentClient({ agent: "demo", transport });
    await client.send("a");
    client.reset();
    await client.send("b");
    expect(transport.requests[1]!.body).toEqual({ messageId: expect.any(String), message: { text: "b" } });
    expect(client.getSnapshot().contextId).toBe("ctx-2");
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["b", "ok"]);
  });

  it("dispose drops listeners and aborts hydration", async () => {
    let hydrationSignal: AbortSignal | undefined;
    const fetch = vi.fn((_url: RequestInfo | URL, init?: RequestInit) => {
      hydrationSignal = init?.signal ?? undefined;
      return new Promise<Response>(() => undefined);
    });
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch });
    const listener = vi.fn();
    client.subscribe(listener);
    void client.start();
    expect(listener).toHaveBeenCalledTimes(1);
    client.dispose();
    expect(hydrationSignal?.aborted).toBe(true);
    client.reset();
    expect(listener).toHaveBeenCalledTimes(1);
    expect((await rejection(client.send("hi"))).code).toBe("disposed");
  });
});

describe("AgentClient transports", () => {
  afterEach(() => vi.unstubAllGlobals());

  function echoServer() {
    const log = newLog();
    const server = fakeWebSocket(
      {
        run: (body) => {
          const r = run(body.contextId ?? "ctx-ws", `run-${log.runs.length}`, 10 * log.runs.length);
          return { frames: [r.start(), r.token("echo"), r.done("echo")] };
        },
      },
      log,
    );
    return { ...server, log };
  }

  it('dispose closes the WebSocket of a transport: "websocket" the client created', async () => {
    const { WebSocket, sockets } = echoServer();
    vi.stubGlobal("WebSocket", WebSocket);
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport: "websocket" });
    expect((await client.send("hi")).text).toBe("echo");
    expect(sockets).toHaveLength(1);
    expect(sockets[0]!.url).toBe("ws://server.test/agents/demo/ws");
    expect(sockets[0]!.readyState).toBe(1);
    client.dispose();
    await tick();
    expect(sockets[0]!.readyState).toBe(3);
  });

  it('opens its socket with the WebSocket class given beside transport: "websocket", and dispose closes it', async () => {
    vi.stubGlobal("WebSocket", undefined); // Node.js 20: no global one
    const { WebSocket, sockets } = echoServer();
    // A client per job, as a script makes them: each one's socket is closed with it.
    for (const job of [1, 2, 3]) {
      const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport: "websocket", WebSocket });
      expect((await client.send(`job ${job}`)).text).toBe("echo");
      expect(sockets).toHaveLength(job);
      client.dispose();
    }
    await tick();
    expect(sockets.map((socket) => [socket.url, socket.readyState])).toEqual(
      Array.from({ length: 3 }, () => ["ws://server.test/agents/demo/ws", 3]),
    );
  });

  it('refuses a WebSocket class without transport: "websocket", where no socket of the client\'s would use it', () => {
    const { WebSocket } = echoServer();
    expect(() => new AgentClient({ agent: "demo", WebSocket })).toThrow(
      new TypeError('AgentClient uses the WebSocket option with transport: "websocket" only; a transport you pass in has its own.'),
    );
    expect(() => new AgentClient({ agent: "demo", transport: new MockTransport(() => []), WebSocket })).toThrow(TypeError);
    expect(() => new AgentClient({ agent: "demo", transport: "sse", WebSocket: undefined }).dispose()).not.toThrow();
  });

  it('fails at once, without retrying, over transport: "websocket" where there is no WebSocket', async () => {
    vi.stubGlobal("WebSocket", undefined);
    const onError = vi.fn();
    const client = new AgentClient({
      agent: "demo",
      baseUrl: "http://server.test",
      transport: "websocket",
      reconnect: { baseDelayMs: 1, maxDelayMs: 1 },
      onError,
    });
    const statuses: string[] = [];
    client.subscribe(() => statuses.push(client.getSnapshot().status));
    const error = await rejection(client.send("hi"));
    expect(error).toMatchObject({ code: "websocket_unavailable", retryable: false });
    expect(error.message).toContain("Node.js 22");
    // The class given to the client first: the client owns that socket and closes it.
    expect(error.message).toContain('new AgentClient({ transport: "websocket", WebSocket, … }), which closes its socket on dispose()');
    expect(statuses).toEqual(["streaming", "error"]);
    expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: "websocket_unavailable" } });
    expect(onError).toHaveBeenCalledWith(error);
    client.dispose();
  });

  it("dispose leaves a transport passed in open: the caller owns it", async () => {
    const mock = new MockTransport(() => {
      const r = run("ctx-1", "run-1");
      return [r.start(), r.done("ok")];
    });
    const mocked = new AgentClient({ agent: "demo", transport: mock });
    await mocked.send("hi");
    mocked.dispose();
    expect(mock.closed).toBe(false);

    const { WebSocket, sockets } = echoServer();
    const shared = new WebSocketTransport({ WebSocket, url: "ws://server.test/agents/demo/ws" });
    const first = new AgentClient({ agent: "demo", transport: shared });
    await first.send("hi");
    first.dispose();
    await tick();
    expect(sockets[0]!.readyState).toBe(1);
    // Another client goes on over the same socket.
    const second = new AgentClient({ agent: "demo", transport: shared });
    expect((await second.send("again")).text).toBe("echo");
    expect(sockets).toHaveLength(1);
    shared.close();
    await tick();
    expect(sockets[0]!.readyState).toBe(3);
  });

  it("sends over SSE by default, with the fetch it was given", async () => {
    const encoder = new TextEncoder();
    const r = run("ctx-1", "run-1");
    const body = [r.start(), r.token("Hi"), r.done("Hi")]
      .map((frame) => `data: ${JSON.stringify(frame)}\n\n`)
      .join("");
    const fetch = vi.fn(async () => new Response(encoder.encode(body), { headers: { "content-type": "text/event-stream" } }));
    const client = new AgentClient({ agent: "demo", baseUrl: "/api", fetch });
    expect((await client.send("hello")).text).toBe("Hi");
    expect(String((fetch.mock.calls[0] as unknown[])[0])).toBe("/api/agents/demo/runs");
    client.dispose();
  });

  describe("without a page and without an absolute baseUrl (Node.js)", () => {
    /** The global fetch, as Node's answers a relative URL: a TypeError, which reads like a network failure. */
    function nodeFetch() {
      const fetch = vi.fn(async (input: unknown) => {
        throw new TypeError(`Failed to parse URL from ${String(input)}`);
      });
      vi.stubGlobal("fetch", fetch);
      return fetch;
    }
    const reconnect = { attempts: 3, baseDelayMs: 1, maxDelayMs: 1 };

    it("refuses a send over SSE at once as invalid_url, without a request and without retrying", async () => {
      const fetch = nodeFetch();
      const onError = vi.fn();
      const client = new AgentClient({ agent: "demo", reconnect, onError });
      const statuses: string[] = [];
      client.subscribe(() => statuses.push(client.getSnapshot().status));
      const error = await rejection(client.send("hi"));
      expect(error).toMatchObject({ code: "invalid_url", retryable: false });
      expect(error.message).toContain('"/agents/demo/runs"');
      expect(error.message).toContain("absolute baseUrl");
      expect(fetch).not.toHaveBeenCalled();
      expect(statuses).toEqual(["streaming", "error"]);
      expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: "invalid_url", retryable: false } });
      expect(onError).toHaveBeenCalledWith(error);
      client.dispose();
    });

    it("shows a resumed conversation's transcript load as invalid_url at once, and a WebSocket's ticket too", async () => {
      const fetch = nodeFetch();
      const resumed = new AgentClient({ agent: "demo", contextId: CTX_1, reconnect });
      const statuses: string[] = [];
      resumed.subscribe(() => statuses.push(resumed.getSnapshot().status));
      await resumed.start();
      expect(statuses).toEqual(["hydrating", "error"]);
      expect(resumed.getSnapshot().error).toMatchObject({ code: "invalid_url", retryable: false });
      resumed.dispose();

      const { WebSocket } = echoServer();
      vi.stubGlobal("WebSocket", WebSocket);
      const ticketed = new AgentClient({ agent: "demo", transport: "websocket", headers: { authorization: "Bearer t" }, reconnect });
      expect(await rejection(ticketed.send("hi"))).toMatchObject({ code: "invalid_url", retryable: false });
      expect(fetch).not.toHaveBeenCalled();
      ticketed.dispose();
    });

    it("leaves a relative URL to a page to resolve, and to a fetch of the app's own", async () => {
      const fetch = nodeFetch();
      vi.stubGlobal("location", { href: "http://page.test/app/" }); // a page, or a worker's location
      const client = new AgentClient({ agent: "demo", reconnect: { attempts: 0 } });
      expect(await rejection(client.send("hi"))).toMatchObject({ code: "network_error" });
      expect(fetch.mock.calls.map(([url]) => url)).toEqual(["/agents/demo/runs"]); // fetch resolves it, as it does in a page
      client.dispose();
    });
  });
});

describe("AgentClient options", () => {
  it("refuses persist, which only useAgent has, pointing at contextId and onContext; and a misspelt option", () => {
    const options = { agent: "demo", persist: { userId: "ada" } }; // plain JavaScript: no type checker to refuse it
    expect(() => new AgentClient(options)).toThrow(TypeError);
    expect(() => new AgentClient(options)).toThrow(/no option persist.*contextId.*onContext.*docs\/hook\.md/);
    const axiosStyle = { agent: "demo", baseURL: "http://server.test" };
    expect(() => new AgentClient(axiosStyle)).toThrow(new TypeError("AgentClient has no option baseURL: did you mean baseUrl?"));
  });

  it("takes an option given as undefined, and names of a wider object spread into the options", () => {
    const config = { agent: "demo", persist: undefined, urls: ["/agents"], name: "chat" };
    expect(() => new AgentClient(config).dispose()).not.toThrow();
  });
});

describe("AgentClient reconnect", () => {
  it("shows a run its server did not survive as the server kept it: interrupted, no question pending", async () => {
    const r = run("ctx-1", "run-1");
    const [start, one, two] = [r.start(), r.token("One, "), r.token("two, ")];
    // The server died after saving "One, "; the one after it numbers the run's `done` past any seq it could have sent.
    const recorded = run("ctx-1", "run-1", 100).done("One, ", [], "interrupted");
    const transport = new MockTransport(
      async function* () {
        yield start;
        yield one;
        yield two;
        throw new ThinwireError("network_error", "Network failure: reset", { retryable: true });
      },
      { attach: () => [recorded] },
    );
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 1 } });
    const result = await client.send("Count");
    expect(result).toMatchObject({ text: "One, ", stopReason: "interrupted" });
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null, interrupt: null });
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "One, ", streaming: false, stopReason: "interrupted" });
  });

  it("reattaches with backoff from the last seq and ends with the uninterrupted text", async () => {
    vi.useFakeTimers();
    try {
      const r = run("ctx-1", "run-1");
      const [start, a, b, c, done] = [r.start(), r.token("One, "), r.token("two, "), r.token("three."), r.done("One, two, three.")];
      let attaches = 0;
      const transport = new MockTransport(
        async function* () {
          yield start;
          yield a;
          throw new ThinwireError("network_error", "Network failure: reset", { retryable: true });
        },
        {
          attach: () => {
            attaches += 1;
            if (attaches < 3) throw new ThinwireError("network_error", "Network failure: offline", { retryable: true });
            return [a, b, a, c, done];
          },
        },
      );
      const client = new AgentClient({ agent: "demo", transport });
      const statuses: string[] = [];
      client.subscribe(() => statuses.push(client.getSnapshot().status));
      let results = 0;
      const sent = client.send("Count").then((result) => {
        results += 1;
        return result;
      });
      await vi.advanceTimersByTimeAsync(0);
      expect(client.getSnapshot().status).toBe("reconnecting");
      expect(client.getSnapshot().turns[1]).toMatchObject({ text: "One, ", streaming: true });
      expect(transport.attaches).toHaveLength(0);
      await vi.advanceTimersByTimeAsync(249);
      expect(transport.attaches).toHaveLength(0);
      await vi.advanceTimersByTimeAsync(1); // 250 ms
      expect(transport.attaches).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(500); // doubled
      expect(transport.attaches).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(1000);
      expect(transport.attaches).toHaveLength(3);
      const result = await sent;
      expect(transport.attaches.map((request) => [request.contextId, request.after])).toEqual([
        ["ctx-1", 2],
        ["ctx-1", 2],
        ["ctx-1", 2],
      ]);
      expect(result.text).toBe("One, two, three.");
      expect(client.getSnapshot().turns[1]).toMatchObject({ text: "One, two, three.", streaming: false });
      expect(client.getSnapshot().status).toBe("idle");
      expect(client.getSnapshot().error).toBeNull();
      expect(statuses.filter((status, index) => status !== statuses[index - 1])).toEqual([
        "streaming",
        "reconnecting",
        "streaming",
        "idle",
      ]);
      expect(results).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("gives up after the configured attempts and keeps the partial reply", async () => {
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => [r.start(), r.token("Half")], {
      attach: () => {
        throw new ThinwireError("network_error", "Network failure: offline", { retryable: true });
      },
    });
    const client = new AgentClient({ agent: "demo", transport, reconnect: { attempts: 3, baseDelayMs: 1, maxDelayMs: 2 } });
    const error = await rejection(client.send("hi"));
    expect(error.code).toBe("network_error");
    expect(transport.attaches).toHaveLength(3);
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "network_error", retryable: true } });
    expect(client.getSnapshot().turns.map((turn) => [turn.text, turn.streaming])).toEqual([
      ["hi", false],
      ["Half", false],
    ]);
  });

  it("settles a run that failed unseen from the transcript, as run_failed", async () => {
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => [r.start(), r.token("Hal")], { attach: () => [] });
    const fetch = vi.fn(async () =>
      jsonResponse(200, {
        contextId: "ctx-1",
        agent: "demo",
        turns: [
          { role: "user", text: "hi", toolCalls: [], stopReason: null },
          { role: "assistant", text: "Hal", toolCalls: [], stopReason: "error" },
        ],
        activeRunId: null,
        pendingInterrupt: null,
      }),
    );
    const client = new AgentClient({ agent: "demo", transport, fetch, reconnect: { baseDelayMs: 1 } });
    const result = await client.send("hi");
    expect(result).toMatchObject({ text: "Hal", runId: "run-1", stopReason: "error" });
    expect(client.getSnapshot()).toMatchObject({
      status: "error",
      error: { code: "run_failed", message: "The run failed.", retryable: false },
    });
    expect(client.getSnapshot().turns.map((turn) => [turn.text, turn.stopReason])).toEqual([
      ["hi", null],
      ["Hal", "error"],
    ]);
  });

  it("does not retry a refusal, nor attach to a run that never started", async () => {
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => [r.start()], {
      attach: () => {
        throw new ThinwireError("context_not_found", "Gone.", { status: 404 });
      },
    });
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 1 } });
    expect((await rejection(client.send("hi"))).code).toBe("context_not_found");
    expect(transport.attaches).toHaveLength(1);

    const never = new MockTransport(() => {
      throw new ThinwireError("network_error", "Network failure: offline", { retryable: true });
    });
    const fresh = new AgentClient({ agent: "demo", transport: never, reconnect: { attempts: 0 } });
    expect((await rejection(fresh.send("hi"))).code).toBe("network_error");
    expect(never.attaches).toHaveLength(0);
  });

  it("reset cancels reconnecting", async () => {
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => [r.start(), r.token("Half")]);
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 10_000 } });
    const sent = client.send("hi");
    await tick();
    expect(client.getSnapshot().status).toBe("reconnecting");
    client.reset();
    expect((await rejection(sent)).code).toBe("aborted");
    expect(client.getSnapshot()).toMatchObject({ status: "idle", turns: [], contextId: null });
    expect(transport.attaches).toHaveLength(0);
  });
});

describe("AgentClient send retry", () => {
  const MESSAGE_ID = /^[A-Za-z0-9_.:-]{8,64}$/;
  const offline = () => new ThinwireError("network_error", "Network failure: offline", { retryable: true });

  it("sends again with backoff, the same body and messageId, showing the user turn once", async () => {
    vi.useFakeTimers();
    try {
      const r = run("ctx-1", "run-1");
      let tries = 0;
      const transport = new MockTransport(() => {
        tries += 1;
        if (tries < 3) throw offline();
        return [r.start(), r.token("Hi"), r.done("Hi")];
      });
      const client = new AgentClient({ agent: "demo", transport });
      const statuses: string[] = [];
      client.subscribe(() => statuses.push(client.getSnapshot().status));
      const sent = client.send("hello");
      await vi.advanceTimersByTimeAsync(0);
      expect(transport.requests).toHaveLength(1);
      expect(client.getSnapshot().status).toBe("reconnecting");
      expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.streaming])).toEqual([
        ["user", "hello", false],
        ["assistant", "", true],
      ]);
      await vi.advanceTimersByTimeAsync(249);
      expect(transport.requests).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1); // 250 ms
      expect(transport.requests).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(500); // doubled
      expect(transport.requests).toHaveLength(3);
      expect(await sent).toEqual({ text: "Hi", toolCalls: [], contextId: "ctx-1", runId: "run-1", stopReason: "end" });

      const [first, ...again] = transport.requests.map((request) => request.body);
      expect(first!.messageId).toMatch(MESSAGE_ID);
      for (const body of again) expect(body).toEqual(first);
      expect(transport.attaches).toHaveLength(0);
      expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
      expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.streaming])).toEqual([
        ["user", "hello", false],
        ["assistant", "Hi", false],
      ]);
      expect(statuses.filter((status, index) => status !== statuses[index - 1])).toEqual([
        "streaming",
        "reconnecting",
        "streaming",
        "idle",
      ]);
    } finally {
      vi.useRealTimers();
    }
  });

  it("sends again after a stream that ended before its first frame", async () => {
    const r = run("ctx-1", "run-1");
    let tries = 0;
    const transport = new MockTransport(() => (++tries === 1 ? [] : [r.start(), r.done("Hi")]));
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 1 } });
    expect((await client.send("hello")).text).toBe("Hi");
    expect(transport.requests).toHaveLength(2);
    expect(transport.requests[1]!.body).toBe(transport.requests[0]!.body);
  });

  it.each([
    ["a 500", new ThinwireError("internal_error", "The server failed.", { status: 500 })],
    ["a proxy's 502", new ThinwireError("http_error", "HTTP 502", { status: 502, retryable: true })],
    ["a WebSocket closed with 1011", new ThinwireError("internal_error", "The server failed.")],
    ["a retryable store_error", new ThinwireError("store_error", "Not saved.", { retryable: true })],
  ])("sends again after %s", async (_name, failure) => {
    const r = run("ctx-1", "run-1");
    let tries = 0;
    const transport = new MockTransport(() => {
      if (++tries === 1) throw failure;
      return [r.start(), r.done("Hi")];
    });
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 1 } });
    expect((await client.send("hello")).text).toBe("Hi");
    expect(transport.requests).toHaveLength(2);
  });

  it.each([
    ["a 413", new ThinwireError("message_too_large", "Too long.", { status: 413 })],
    ["a 409 context_busy", new ThinwireError("context_busy", "Busy.", { status: 409, retryable: true })],
    ["a rejected context_busy", new ThinwireError("context_busy", "Busy.", { retryable: true })],
    ["a rejected rate_limited", new ThinwireError("rate_limited", "Slow down.", { retryable: true })],
    ["a rejected too_many_streams", new ThinwireError("too_many_streams", "Too many.", { retryable: true })],
    ["a rejected too_many_runs", new ThinwireError("too_many_runs", "Too many.", { retryable: true })],
    ["a rejected invalid_request", new ThinwireError("invalid_request", "No.")],
    ["a protocol_error", new ThinwireError("protocol_error", "Not an event stream.", { status: 200 })],
  ])("shows %s without sending again", async (_name, failure) => {
    const transport = new MockTransport(() => {
      throw failure;
    });
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 1 } });
    expect(await rejection(client.send("hello"))).toBe(failure);
    expect(transport.requests).toHaveLength(1);
    expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: failure.code } });
  });

  it("gives up after the configured attempts, leaving no trace but the error", async () => {
    const transport = new MockTransport(() => {
      throw offline();
    });
    const reconnect = { attempts: 3, baseDelayMs: 1, maxDelayMs: 2 };
    const client = new AgentClient({ agent: "demo", transport, reconnect });
    expect((await rejection(client.send("hello"))).code).toBe("network_error");
    expect(transport.requests).toHaveLength(4);
    expect(new Set(transport.requests.map((request) => request.body.messageId)).size).toBe(1);
    expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: "network_error" } });
  });

  it("starts counting again once a try got frames through", async () => {
    const r = run("ctx-1", "run-1");
    const [start, a, b, done] = [r.start(), r.token("One, "), r.token("two."), r.done("One, two.")];
    let tries = 0;
    let attaches = 0;
    const transport = new MockTransport(
      async function* () {
        if (++tries < 3) throw offline();
        yield start;
        yield a;
        throw offline();
      },
      {
        attach: () => {
          if (++attaches < 3) throw offline();
          return [b, done];
        },
      },
    );
    const client = new AgentClient({ agent: "demo", transport, reconnect: { attempts: 3, baseDelayMs: 1 } });
    expect((await client.send("Count")).text).toBe("One, two.");
    expect(transport.requests).toHaveLength(3);
    expect(transport.attaches.map((request) => request.after)).toEqual([2, 2, 2]);
  });

  it("dispose during the backoff aborts the send", async () => {
    const transport = new MockTransport(() => {
      throw offline();
    });
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 10_000 } });
    const sent = client.send("hello");
    await tick();
    expect(client.getSnapshot().status).toBe("reconnecting");
    client.dispose();
    expect((await rejection(sent)).code).toBe("aborted");
    expect(transport.requests).toHaveLength(1);
  });

  it("gives every send its own messageId", async () => {
    let count = 0;
    const transport = new MockTransport(() => {
      const r = run("ctx-1", `run-${++count}`, count * 10);
      return [r.start(), r.done("ok")];
    });
    const client = new AgentClient({ agent: "demo", transport });
    await client.send("one");
    await client.send("two");
    const [one, two] = transport.requests.map((request) => request.body.messageId);
    expect(one).toMatch(MESSAGE_ID);
    expect(two).toMatch(MESSAGE_ID);
    expect(one).not.toBe(two);
  });

  it("without cryptographic randomness sends no messageId, and does not send again", async () => {
    vi.stubGlobal("crypto", undefined);
    try {
      const transport = new MockTransport(() => {
        throw offline();
      });
      const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 1 } });
      expect((await rejection(client.send("hello"))).code).toBe("network_error");
      expect(transport.requests).toHaveLength(1);
      expect(transport.requests[0]!.body).toEqual({ message: { text: "hello" } });
    } finally {
      vi.unstubAllGlobals();
    }
  });
});

describe("AgentClient.stop", () => {
  it("is a no-op without a run", async () => {
    const transport = new MockTransport(() => []);
    const client = new AgentClient({ agent: "demo", transport });
    await client.stop();
    expect(transport.stops).toHaveLength(0);
  });

  it("asks the server to stop the run; the send resolves with the stopped reply", async () => {
    const stream = channel();
    const r = run("ctx-1", "run-1");
    const transport = new MockTransport(() => stream.frames(), {
      stop: () => {
        stream.push(r.done("Par", [], "stopped"));
        stream.end();
      },
    });
    const client = new AgentClient({ agent: "demo", baseUrl: "/api", transport });
    const sent = client.send("Long story");
    // Asked before the server announced the run: sent once it does.
    const stopped = client.stop();
    await tick();
    expect(transport.stops).toHaveLength(0);
    stream.push(r.start());
    stream.push(r.token("Par"));
    await stopped;
    expect(transport.stops).toEqual([
      { baseUrl: "/api", agent: "demo", contextId: "ctx-1", headers: { "Thinwire-Protocol": "1" } },
    ]);
    expect(await sent).toMatchObject({ text: "Par", stopReason: "stopped" });
    expect(client.getSnapshot().status).toBe("idle");
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "Par", stopReason: "stopped", streaming: false });
  });
});

describe("AgentClient render batching", () => {
  it("notifies once per scheduled flush, at once for status changes, never losing the last change", async () => {
    const flushes: Array<() => void> = [];
    const stream = channel();
    const client = new AgentClient({
      agent: "demo",
      transport: new MockTransport(() => stream.frames()),
      schedule: (flush) => flushes.push(flush),
    });
    const seen: string[] = [];
    client.subscribe(() => seen.push(`${client.getSnapshot().status}:${client.getSnapshot().turns[1]?.text ?? ""}`));
    const r = run("ctx-1", "run-1");
    const sent = client.send("hi");
    expect(seen).toEqual(["streaming:"]); // a status change: notified at once
    stream.push(r.start());
    for (const word of ["a", "b", "c", "d"]) stream.push(r.token(word));
    await tick();
    expect(client.getSnapshot().turns[1]?.text).toBe("abcd"); // getSnapshot is always current
    expect(seen).toEqual(["streaming:"]);
    expect(flushes).toHaveLength(1);
    flushes.shift()!();
    expect(seen).toEqual(["streaming:", "streaming:abcd"]);
    stream.push(r.token("e"));
    await tick();
    stream.push(r.done("abcde"));
    await sent;
    expect(seen).toEqual(["streaming:", "streaming:abcd", "idle:abcde"]);
    flushes.shift()?.(); // the flush scheduled for "e" finds nothing left to announce
    expect(seen).toHaveLength(3);
  });
});

describe("AgentClient in a long conversation", () => {
  /**
   * Counts, until `restore()`, the calls of the array methods that copy an
   * array (or walk all of it) made on one of at least `length` items.
   */
  function countCopies(length: number) {
    let count = 0;
    const proto = Array.prototype as unknown as Record<PropertyKey, (this: unknown[], ...args: unknown[]) => unknown>;
    const names = ["slice", "map", "filter", "flatMap", "concat", "with", "toSpliced", Symbol.iterator].filter((name) => name in proto);
    const originals = names.map((name) => [name, proto[name]!] as const);
    for (const [name, original] of originals) {
      proto[name] = function (this: unknown[], ...args: unknown[]) {
        if (this.length >= length) count += 1;
        return original.apply(this, args);
      };
    }
    const from = Array.from;
    Array.from = ((items: ArrayLike<unknown>, ...rest: []) => {
      if (items.length >= length) count += 1;
      return from(items, ...rest);
    }) as typeof Array.from;
    return {
      get count() {
        return count;
      },
      restore() {
        for (const [name, original] of originals) proto[name] = original;
        Array.from = from;
      },
    };
  }

  it("adds a token to the reply without copying the turns for each: once for a read of them", async () => {
    const earlier = Array.from({ length: 5000 }, (_, i) =>
      transcriptTurn(i % 2 === 0 ? "user" : "assistant", `turn ${i}`, { id: `turn-${"0".repeat(12)}-${i % 2 === 0 ? "u" : "a"}${i}` }),
    );
    const transcript = { contextId: CTX_1, agent: "demo", title: "Long", turns: earlier, activeRunId: null, pendingInterrupt: null, hasEarlier: false };
    const stream = channel();
    const flushes: Array<() => void> = [];
    const client = new AgentClient({
      agent: "demo",
      baseUrl: "/api",
      contextId: CTX_1,
      pageSize: Infinity,
      fetch: async () => jsonResponse(200, transcript),
      transport: new MockTransport(() => stream.frames()),
      schedule: (flush) => flushes.push(flush),
    });
    await client.start();
    const shown = client.getSnapshot().turns;
    expect(shown).toHaveLength(5000);
    const renders: Array<readonly unknown[]> = [];
    client.subscribe(() => renders.push(client.getSnapshot().turns));
    const r = run(CTX_1, "run-1");
    const sent = client.send("more");
    stream.push(r.start());
    await tick();
    const words = Array.from({ length: 1000 }, (_, i) => `w${i} `);
    const copies = countCopies(5000);
    try {
      for (const word of words) stream.push(r.token(word));
      await tick();
      flushes.shift()!(); // one render for the burst
    } finally {
      copies.restore();
    }
    expect(copies.count).toBeLessThanOrEqual(2); // the render's read: one copy of the turns (a slice, then a spread)
    const streamed = client.getSnapshot();
    expect(renders.at(-1)).toBe(streamed.turns);
    expect(streamed.turns.at(-1)).toMatchObject({ role: "assistant", text: words.join(""), streaming: true });
    expect(streamed.turns.slice(0, 5000).every((turn, i) => turn === shown[i])).toBe(true); // the same objects
    stream.push(r.done(words.join("")));
    await expect(sent).resolves.toMatchObject({ text: words.join(""), stopReason: "end" });
  });

  it("shows every delta on any read, as the reducer would, a new snapshot only after a change", async () => {
    const stream = channel();
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(() => stream.frames()) });
    const r = run("ctx-1", "run-1");
    const sent = client.send("hi");
    stream.push(r.start());
    const frames = [r.thinking("Hm"), r.token("a"), r.token("b"), r.thinking(", yes")];
    for (const frame of frames) stream.push(frame);
    await tick();
    const first = client.getSnapshot();
    expect(client.getSnapshot()).toBe(first);
    expect(first.thinking).toBe("Hm, yes");
    expect(first.turns[1]).toMatchObject({ text: "ab", thinking: "Hm, yes", streaming: true });
    stream.push(frames[2]!); // seen already: no change
    stream.push(r.token("c"));
    await tick();
    const second = client.getSnapshot();
    expect(second).not.toBe(first);
    expect(second.turns).not.toBe(first.turns);
    expect(second.turns[0]).toBe(first.turns[0]);
    expect(second.turns[1]).toMatchObject({ text: "abc", thinking: "Hm, yes" });
    expect(first.turns[1]).toMatchObject({ text: "ab" }); // a snapshot handed out never changes
    stream.push(r.done("abc"));
    await sent;
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "abc", thinking: "Hm, yes", streaming: false, stopReason: "end" });
  });
});

describe("AgentClient human in the loop", () => {
  const refund: InterruptRequest = {
    interruptId: "int-1",
    prompt: "Refund $40 on order 1234?",
    options: ["approve", "reject"],
    payload: { order: "1234", amount: "$40" },
    decisionSchema: null,
  };
  const followUp: InterruptRequest = { ...refund, interruptId: "int-2", prompt: "Also email the customer?" };

  /** A first run that asks about the refund. */
  /** A run that names the conversation (so no transcript is loaded for its title), then asks. */
  function asking() {
    const r = run("ctx-1", "run-1");
    return [r.start(), r.title("Refund"), r.token("Let me check."), r.interrupt(refund), r.done("Let me check.", ["lookup"], "interrupted")];
  }

  function transcriptResponse(body: Partial<Transcript>): Response {
    return jsonResponse(200, { contextId: "ctx-1", agent: "demo", turns: [], activeRunId: null, pendingInterrupt: null, ...body });
  }

  it("keeps the question of a run that asks, and resolves the send as interrupted", async () => {
    const transport = new MockTransport(asking);
    const client = new AgentClient({ agent: "demo", transport });
    const result = await client.send("Refund order 1234");
    expect(result).toEqual({
      text: "Let me check.",
      toolCalls: ["lookup"],
      contextId: "ctx-1",
      runId: "run-1",
      stopReason: "interrupted",
    });
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null, interrupt: refund });
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "Let me check.", streaming: false, stopReason: "interrupted" });
    // The reply that asked carries the question, as the transcript will.
    expect(client.getSnapshot().turns[1]!.asked).toEqual({ request: refund, status: "waiting", decision: null });
    expect(client.getSnapshot().turns[0]!.asked).toBeNull();
  });

  it("reads what each reply asked from the transcript, and shows an answer at once", async () => {
    const asked = { request: refund, status: "waiting", decision: null } as const;
    const fetch = vi.fn(async () =>
      transcriptResponse({
        turns: [
          transcriptTurn("user", "Refund order 1234"),
          transcriptTurn("assistant", "Which one?", {
            stopReason: "interrupted",
            asked: { request: { ...followUp, internal: "x" } as InterruptRequest, status: "answered", decision: { pick: 1 } },
          }),
          transcriptTurn("assistant", "Let me check.", { stopReason: "interrupted", asked }),
          transcriptTurn("assistant", "Broken.", { asked: { status: "answered" } as unknown as TurnAsked }),
        ],
        pendingInterrupt: refund,
      }),
    );
    const stream = channel();
    const transport = new MockTransport(() => [], { decide: () => stream.frames() });
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, transport });
    await client.start();
    const shown = () => client.getSnapshot().turns.map((turn) => turn.asked);
    // Only the request's public fields; a malformed one is no question at all.
    expect(shown()).toEqual([null, { request: followUp, status: "answered", decision: { pick: 1 } }, asked, null]);

    const decided = client.decide("approve");
    // The asking reply shows the answer as soon as it goes out, before the run begins.
    expect(shown()[2]).toEqual({ request: refund, status: "answered", decision: "approve" });
    expect(shown()[1]).toEqual({ request: followUp, status: "answered", decision: { pick: 1 } });
    const r = run("ctx-1", "run-2", 10);
    stream.push(r.start());
    stream.push(r.done("Refunded."));
    await decided;
    expect(shown()[2]).toEqual({ request: refund, status: "answered", decision: "approve" });
  });

  it("hydrates the pending interrupt of a resumed conversation", async () => {
    const fetch = vi.fn(async () =>
      transcriptResponse({
        turns: [
          transcriptTurn("user", "Refund order 1234"),
          transcriptTurn("assistant", "Let me check.", { toolCalls: ["lookup"], stopReason: "interrupted" }),
        ],
        pendingInterrupt: refund,
      }),
    );
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, transport: new MockTransport(() => []) });
    await client.start();
    expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: refund });
    expect(client.getSnapshot().turns).toHaveLength(2);
  });

  it("refuses a send while a decision is pending, without a request", async () => {
    const transport = new MockTransport(asking);
    const client = new AgentClient({ agent: "demo", transport });
    await client.send("Refund order 1234");
    const before = client.getSnapshot();
    const error = await rejection(client.send("Never mind"));
    expect(error).toMatchObject({ code: "decision_pending", interruptId: "int-1" });
    expect(transport.requests).toHaveLength(1);
    expect(client.getSnapshot()).toBe(before);
  });

  it("refuses a decision when nothing is pending, without a request", async () => {
    const transport = new MockTransport(() => []);
    const client = new AgentClient({ agent: "demo", transport, contextId: "ctx-1" });
    expect((await rejection(client.decide("approve"))).code).toBe("no_pending_interrupt");
    expect(transport.decisions).toHaveLength(0);
  });

  it("answers the interrupt and streams the continued run into a new reply, which may ask again", async () => {
    const stream = channel();
    let decisions = 0;
    const transport = new MockTransport(asking, {
      decide: () => {
        decisions += 1;
        if (decisions === 1) return stream.frames();
        const r = run("ctx-1", "run-3", 20);
        return [r.start(), r.token("Done."), r.done("Done.")];
      },
    });
    const client = new AgentClient({ agent: "demo", baseUrl: "/api", transport, headers: { authorization: "Bearer t" } });
    await client.send("Refund order 1234");

    const decided = client.decide("approve");
    expect(client.getSnapshot().turns[1]!.asked).toEqual({ request: refund, status: "answered", decision: "approve" });
    // Sent at once; the question leaves the view and a fresh reply streams.
    expect(client.getSnapshot()).toMatchObject({ interrupt: null, status: "streaming", thinking: "", activity: [] });
    expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.streaming])).toEqual([
      ["user", false],
      ["assistant", false],
      ["assistant", true],
    ]);
    await tick();
    expect(transport.decisions).toHaveLength(1);
    expect(transport.decisions[0]).toMatchObject({
      baseUrl: "/api",
      agent: "demo",
      contextId: "ctx-1",
      interruptId: "int-1",
      value: "approve",
      headers: { authorization: "Bearer t", "Thinwire-Protocol": "1" },
    });
    const r = run("ctx-1", "run-2", 10);
    stream.push(r.start());
    stream.push(r.call("c1", "issue_refund"));
    stream.push(r.result("c1", "issue_refund"));
    stream.push(r.token("Refunded."));
    await tick();
    expect(client.getSnapshot().turns[2]).toMatchObject({ text: "Refunded.", streaming: true });
    stream.push(r.interrupt(followUp));
    stream.push(r.done("Refunded.", ["issue_refund"], "interrupted"));
    expect(await decided).toEqual({
      text: "Refunded.",
      toolCalls: ["issue_refund"],
      contextId: "ctx-1",
      runId: "run-2",
      stopReason: "interrupted",
    });
    expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: followUp, error: null });
    expect(client.getSnapshot().activity).toEqual([{ callId: "c1", name: "issue_refund", state: "ok" }]);

    const second = await client.decide("reject");
    expect(transport.decisions[1]).toMatchObject({ interruptId: "int-2", value: "reject" });
    expect(second).toMatchObject({ text: "Done.", runId: "run-3", stopReason: "end" });
    expect(client.getSnapshot().turns.map((turn) => turn.asked?.decision ?? null)).toEqual([null, "approve", "reject", null]);
    expect(client.getSnapshot().interrupt).toBeNull();
    expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.stopReason])).toEqual([
      ["user", "Refund order 1234", null],
      ["assistant", "Let me check.", "interrupted"],
      ["assistant", "Refunded.", "interrupted"],
      ["assistant", "Done.", "end"],
    ]);
    expect(new Set(client.getSnapshot().turns.map((turn) => turn.id)).size).toBe(4);
  });

  it("reattaches to a continued run whose stream broke", async () => {
    const r = run("ctx-1", "run-2", 10);
    const [start, a, b, done] = [r.start(), r.token("Refun"), r.token("ded."), r.done("Refunded.")];
    const transport = new MockTransport(asking, {
      decide: () => [start!, a!],
      attach: () => [b!, done!],
    });
    const client = new AgentClient({ agent: "demo", transport, reconnect: { baseDelayMs: 1 } });
    await client.send("Refund order 1234");
    expect((await client.decide("approve")).text).toBe("Refunded.");
    expect(transport.attaches.map((request) => [request.contextId, request.after])).toEqual([["ctx-1", 11]]);
    expect(client.getSnapshot().turns[2]).toMatchObject({ text: "Refunded.", streaming: false, stopReason: "end" });
  });

  it("keeps the interrupt pending when the server refuses the decision", async () => {
    const transport = new MockTransport(asking, {
      decide: () => {
        throw new ThinwireError("invalid_decision", "Choose approve or reject.", { status: 400 });
      },
    });
    const client = new AgentClient({ agent: "demo", transport });
    await client.send("Refund order 1234");
    const turns = client.getSnapshot().turns;
    const error = await rejection(client.decide("maybe"));
    expect(error).toMatchObject({ code: "invalid_decision", status: 400 });
    expect(client.getSnapshot()).toMatchObject({
      status: "error",
      interrupt: refund,
      error: { code: "invalid_decision", message: "Choose approve or reject." },
    });
    expect(client.getSnapshot().turns).toEqual(turns);
  });

  it("drops an interrupt the server says was answered, and shows the transcript again", async () => {
    const transport = new MockTransport(asking, {
      decide: () => {
        throw new ThinwireError("interrupt_answered", "Answered already.", { status: 409 });
      },
    });
    const fetch = vi.fn(async () =>
      transcriptResponse({
        turns: [
          transcriptTurn("user", "Refund order 1234"),
          transcriptTurn("assistant", "Let me check.", { toolCalls: ["lookup"], stopReason: "interrupted" }),
          transcriptTurn("assistant", "Refunded.", { toolCalls: ["issue_refund"] }),
        ],
      }),
    );
    const client = new AgentClient({ agent: "demo", transport, fetch });
    await client.send("Refund order 1234");
    expect((await rejection(client.decide("approve"))).code).toBe("interrupt_answered");
    expect(client.getSnapshot()).toMatchObject({ interrupt: null, error: { code: "interrupt_answered" } });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["Refund order 1234", "Let me check.", "Refunded."]);
  });

  it("stop while a decision is pending ends the waiting run and shows the transcript", async () => {
    const transport = new MockTransport(asking);
    let answer: (response: Response) => void = () => {};
    const fetch = vi.fn(() => new Promise<Response>((resolve) => (answer = resolve)));
    const client = new AgentClient({ agent: "demo", baseUrl: "/api", transport, fetch });
    await client.send("Refund order 1234");
    const ids = client.getSnapshot().turns.map((turn) => turn.id);
    const stopped = client.stop();
    await vi.waitFor(() => expect(fetch).toHaveBeenCalledTimes(1));
    // Shown at once as the server records it: the reply that asked is the last, stopped.
    const said = () => client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.stopReason]);
    const recorded = [
      ["user", "Refund order 1234", null],
      ["assistant", "Let me check.", "stopped"],
    ];
    expect(said()).toEqual(recorded);
    expect(client.getSnapshot().turns[1]!.asked).toEqual({ request: refund, status: "stopped", decision: null });
    answer(
      transcriptResponse({
        turns: [
          transcriptTurn("user", "Refund order 1234"),
          transcriptTurn("assistant", "Let me check.", { toolCalls: ["lookup"], stopReason: "stopped" }),
        ],
      }),
    );
    await stopped;
    expect(transport.stops.map((request) => request.contextId)).toEqual(["ctx-1"]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: null, error: null });
    expect(said()).toEqual(recorded);
    expect(client.getSnapshot().turns.map((turn) => turn.id)).toEqual(ids);
    // Nothing waits any more.
    expect((await rejection(client.decide("approve"))).code).toBe("no_pending_interrupt");
  });

  it("drops the transcript a stop of the waiting run asked for, once a send taken meanwhile shows its run", async () => {
    let last: string | null = null;
    const transport = new MockTransport(({ body }) => {
      if (body.message.text !== "thanks") return asking();
      const r = run("ctx-1", "run-2", 10);
      return [r.start({ afterTurnId: last }), r.token("You're welcome."), r.done("You're welcome.")];
    });
    let answer: (response: Response) => void = () => {};
    const fetch = vi.fn(() => new Promise<Response>((resolve) => (answer = resolve)));
    const client = new AgentClient({ agent: "demo", transport, fetch });
    await client.send("Refund order 1234");
    const stopped = client.stop();
    await vi.waitFor(() => expect(fetch).toHaveBeenCalledTimes(1)); // the transcript, as it is before the send
    last = client.getSnapshot().turns.at(-1)!.id;
    expect((await client.send("thanks")).text).toBe("You're welcome.");
    answer(
      transcriptResponse({
        turns: [
          transcriptTurn("user", "Refund order 1234"),
          transcriptTurn("assistant", "Let me check.", { toolCalls: ["lookup"], stopReason: "stopped" }),
        ],
      }),
    );
    await stopped;
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["Refund order 1234", "Let me check.", "thanks", "You're welcome."]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: null });
    expect(fetch).toHaveBeenCalledTimes(1);
  });

  it("sends a decision taken while the server ends the waiting run once the stop is answered", async () => {
    let answerStop: (() => void) | null = null;
    let ended = false;
    const transport = new MockTransport(asking, {
      // The server holds the conversation while it ends the waiting run, as for a run.
      stop: () =>
        new Promise<void>((resolve) => {
          answerStop = () => {
            ended = true;
            resolve();
          };
        }),
      decide: () => {
        if (!ended) throw new ThinwireError("context_busy", "Busy.", { status: 409, retryable: true });
        throw new ThinwireError("interrupt_not_found", "Gone.", { status: 404 });
      },
    });
    const stoppedTurns = [
      transcriptTurn("user", "Refund order 1234"),
      transcriptTurn("assistant", "Let me check.", { toolCalls: ["lookup"], stopReason: "stopped" }),
    ];
    const fetch = vi.fn(async () => transcriptResponse({ turns: stoppedTurns }));
    const client = new AgentClient({ agent: "demo", transport, fetch });
    await client.send("Refund order 1234");
    const stopping = client.stop();
    await vi.waitFor(() => expect(answerStop).not.toBeNull());
    // The question is still shown: the decision is taken, and shows its answer at once.
    const deciding = client.decide("approve");
    expect(client.getSnapshot()).toMatchObject({ status: "streaming", interrupt: null });
    await new Promise((resolve) => setTimeout(resolve, 0)); // time for a request made at once: none was
    expect(transport.decisions).toHaveLength(0);
    answerStop!();
    // The stop came first: the question is gone, and the view shows the stopped run.
    expect((await rejection(deciding)).code).toBe("interrupt_not_found");
    await stopping;
    expect(client.getSnapshot()).toMatchObject({ status: "error", interrupt: null, error: { code: "interrupt_not_found" } });
    expect(client.getSnapshot().turns.map((turn) => [turn.text, turn.stopReason])).toEqual([
      ["Refund order 1234", null],
      ["Let me check.", "stopped"],
    ]);
  });

  it("reset forgets the pending interrupt", async () => {
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(asking) });
    await client.send("Refund order 1234");
    client.reset();
    expect(client.getSnapshot().interrupt).toBeNull();
  });
});

describe("AgentClient branches over a MockTransport", () => {
  it("regenerates and edits through the transport's handlers, which refuse by default", async () => {
    let runs = 0;
    const reply = (text: string, userTurnId: string | null) => {
      runs += 1;
      const r = run("ctx-1", `run-${runs}`, runs * 10);
      return [r.start({ turnId: `turn-000000000000-a${runs * 2}`, userTurnId }), r.token(text), r.done(text)];
    };
    const refusing = new MockTransport(() => reply("first", "turn-000000000000-u1"));
    const client = new AgentClient({ agent: "demo", transport: refusing, fetch: async () => jsonResponse(404, {}) });
    await client.send("hi");
    expect((await rejection(client.regenerate())).code).toBe("nothing_to_regenerate");
    expect((await rejection(client.edit("turn-000000000000-u1", "hey"))).code).toBe("turn_not_found");
    expect(refusing.regenerations).toHaveLength(1);
    expect(refusing.edits[0]!.body).toMatchObject({ turnId: "turn-000000000000-u1", message: { text: "hey" } });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["hi", "first"]);

    const transport = new MockTransport(() => reply("first", "turn-000000000000-u1"), {
      regenerate: () => reply("again", "turn-000000000000-u1"),
      edit: ({ body }) => reply(`re: ${body.message.text}`, "turn-000000000000-u3"),
    });
    const other = new AgentClient({ agent: "demo", transport, fetch: async () => jsonResponse(404, {}) });
    await other.send("hi");
    expect((await other.regenerate()).text).toBe("again");
    expect(transport.regenerations[0]).toMatchObject({ contextId: "ctx-1", body: { messageId: expect.any(String) } });
    expect((await other.edit("turn-000000000000-u1", "hey")).text).toBe("re: hey");
    // The transcript could not be loaded again (404 here): the view keeps what streamed.
    expect(other.getSnapshot().turns.map((turn) => [turn.id, turn.text, turn.siblingIndex, turn.siblings])).toEqual([
      ["turn-000000000000-u3", "hey", 2, 3],
      ["turn-000000000000-a8", "re: hey", 2, 3],
    ]);
  });
});
