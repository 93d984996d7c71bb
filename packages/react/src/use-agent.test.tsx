/** useAgent over a MockTransport or a fake server: streaming, persist, StrictMode and <Activity>, commit rate, decisions, pages. */
import { act, cleanup, fireEvent, render, renderHook, screen, waitFor } from "@testing-library/react";
import { AgentClient, type Frame, type SendResult, ThinwireError, type Transcript } from "@thinwire/client";
import {
  channel,
  conversationScript,
  fakeFetch,
  fakeWebSocket,
  MockTransport,
  newLog,
  runFrames,
  type Script,
  transcriptTurn,
} from "@thinwire/client/testing";
import { Activity, Profiler } from "react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { refund } from "../../client/src/test-helpers.js";
import { contextStorageKey, useAgent, type UseAgentOptions, type UseAgentResult } from "./use-agent.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const ALICES = "ctx-" + "a".repeat(36);
const BOBS = "ctx-" + "b".repeat(36);

/** One run that says `reply` in a single token. */
function frames(contextId: string, runId: string, reply: string, firstSeq = 1): Frame[] {
  const run = runFrames(contextId, runId, firstSeq);
  return [run.start(), run.token(reply), run.done(reply)];
}

/**
 * A server stand-in: transcripts by context id, runs that mint ids in order.
 * A run announces its turns' ids and the turn it follows (as `transcript`
 * numbers them), and names a conversation it starts (so no transcript is read
 * for a title).
 */
function fakeServer(transcripts: Record<string, Transcript> = {}) {
  let minted = 0;
  const exchanges = new Map<string, number>();
  const fetch = vi.fn(async (input: RequestInfo | URL) => {
    const contextId = decodeURIComponent(new URL(String(input), "http://server.test").pathname.split("/contexts/")[1] ?? "");
    const transcript = transcripts[contextId];
    if (!transcript) {
      return new Response(JSON.stringify({ error: { code: "context_not_found", message: "Unknown." } }), {
        status: 404,
      });
    }
    return new Response(JSON.stringify(transcript), { headers: { "content-type": "application/json" } });
  });
  const transport: MockTransport = new MockTransport((request) => {
    const known = request.body.contextId;
    const contextId = known ?? mintedId(++minted);
    const exchange = exchanges.get(contextId) ?? (known ? (transcripts[known]?.turns.length ?? 0) / 2 : 0);
    exchanges.set(contextId, exchange + 1);
    const run = runFrames(contextId, `run-${transport.requests.length}`, 100 * transport.requests.length);
    const reply = `echo: ${request.body.message.text}`;
    const ids = {
      userTurnId: turnId(contextId, "u", exchange),
      turnId: turnId(contextId, "a", exchange),
      afterTurnId: exchange === 0 ? null : turnId(contextId, "a", exchange - 1),
    };
    const start = run.start(ids);
    const title = known ? [] : [run.title(request.body.message.text)];
    return [start, ...title, run.token(reply), run.done(reply)];
  });
  return { fetch, transport };
}

/** The id `fakeServer` gives the `n`th conversation it starts. */
function mintedId(n: number): string {
  return `ctx-${String(n).padStart(36, "0")}`;
}

const NEW_1 = mintedId(1);

/** The id of a turn of exchange `exchange` of a conversation, in `fakeServer`. */
function turnId(contextId: string, role: "u" | "a", exchange: number): string {
  return `turn-${contextId}-${role}${exchange}`;
}

/** A conversation of one exchange, named after its message (as the server names one). */
function transcript(contextId: string, userText: string, reply: string): Transcript {
  return {
    contextId,
    agent: "demo",
    title: userText,
    turns: [
      transcriptTurn("user", userText, { id: turnId(contextId, "u", 0) }),
      transcriptTurn("assistant", reply, { id: turnId(contextId, "a", 0) }),
    ],
    activeRunId: null,
    pendingInterrupt: null,
    hasEarlier: false,
  };
}

function storageContents(): Record<string, string> {
  const out: Record<string, string> = {};
  for (let index = 0; index < localStorage.length; index++) {
    const key = localStorage.key(index)!;
    out[key] = localStorage.getItem(key)!;
  }
  return out;
}

beforeEach(() => localStorage.clear());
afterEach(() => localStorage.clear());

describe("useAgent", () => {
  it("streams a reply into the turns", async () => {
    const stream = channel();
    const transport = new MockTransport(() => stream.frames());
    const { result } = renderHook(() => useAgent({ agent: "demo", transport }), { reactStrictMode: true });
    expect(result.current.status).toBe("idle");
    expect(result.current.turns).toEqual([]);

    let sent!: Promise<unknown>;
    act(() => {
      sent = result.current.send("Hello");
    });
    expect(result.current.status).toBe("streaming");
    const [start, token, done] = frames("ctx-1", "run-1", "Hi!");
    await act(async () => {
      stream.push(start!);
      stream.push(token!);
    });
    await waitFor(() => expect(result.current.turns[1]?.text).toBe("Hi!"));
    expect(result.current.turns[1]?.streaming).toBe(true);
    expect(result.current.contextRef.current).toBe("ctx-1");
    await act(async () => {
      stream.push(done!);
      await sent;
    });
    expect(result.current.status).toBe("idle");
    expect(result.current.turns.map((turn) => [turn.role, turn.text, turn.streaming])).toEqual([
      ["user", "Hello", false],
      ["assistant", "Hi!", false],
    ]);
    expect(transport.requests).toHaveLength(1);
    expect(result.current).not.toHaveProperty("contextId");
  });

  it("persists only the id, under the per-user key", async () => {
    const { transport, fetch } = fakeServer();
    const { result } = renderHook(() =>
      useAgent({ agent: "demo", transport, fetch, persist: { userId: "alice@example.com" } }),
    );
    expect(storageContents()).toEqual({});
    await act(async () => {
      await result.current.send("secret plans");
    });
    expect(storageContents()).toEqual({ "thinwire:demo:alice%40example.com:contextId": NEW_1 });
    expect(contextStorageKey("demo", "alice@example.com")).toBe("thinwire:demo:alice%40example.com:contextId");
    expect(result.current.contextRef.current).toBe(NEW_1);
    expect(fetch).not.toHaveBeenCalled();
  });

  it("resumes from storage: hydrates once, then continues the same context, under StrictMode", async () => {
    localStorage.setItem(contextStorageKey("demo", "alice"), ALICES);
    const { transport, fetch } = fakeServer({ [ALICES]: transcript(ALICES, "Hi, I am Alice", "Hello Alice") });
    const { result } = renderHook(
      () => useAgent({ agent: "demo", transport, fetch, persist: { userId: "alice" } }),
      { reactStrictMode: true },
    );
    expect(result.current.contextRef.current).toBe(ALICES);
    await waitFor(() => expect(result.current.status).toBe("idle"));
    expect(result.current.turns.map((turn) => turn.text)).toEqual(["Hi, I am Alice", "Hello Alice"]);
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(String(fetch.mock.calls[0]![0])).toBe(`/agents/demo/contexts/${ALICES}?limit=50`);

    await act(async () => {
      await result.current.send("again");
    });
    expect(transport.requests).toHaveLength(1);
    expect(transport.requests[0]!.body).toEqual({
      contextId: ALICES,
      messageId: expect.any(String),
      message: { text: "again" },
    });
    expect(result.current.turns.map((turn) => turn.text)).toEqual([
      "Hi, I am Alice",
      "Hello Alice",
      "again",
      "echo: again",
    ]);
    expect(storageContents()).toEqual({ "thinwire:demo:alice:contextId": ALICES });
  });

  it("switches to the other user's conversation when the user changes", async () => {
    localStorage.setItem(contextStorageKey("demo", "alice"), ALICES);
    localStorage.setItem(contextStorageKey("demo", "bob"), BOBS);
    const { transport, fetch } = fakeServer({
      [ALICES]: transcript(ALICES, "I am Alice", "Hi Alice"),
      [BOBS]: transcript(BOBS, "I am Bob", "Hi Bob"),
    });
    const { result, rerender } = renderHook(
      ({ userId }: { userId: string }) => useAgent({ agent: "demo", transport, fetch, persist: { userId } }),
      { initialProps: { userId: "alice" }, reactStrictMode: true },
    );
    await waitFor(() => expect(result.current.turns.map((turn) => turn.text)).toEqual(["I am Alice", "Hi Alice"]));

    rerender({ userId: "bob" });
    expect(result.current.contextRef.current).toBe(BOBS);
    await waitFor(() => expect(result.current.turns.map((turn) => turn.text)).toEqual(["I am Bob", "Hi Bob"]));
    expect(fetch.mock.calls.map((call) => String(call[0]))).toEqual([
      `/agents/demo/contexts/${ALICES}?limit=50`,
      `/agents/demo/contexts/${BOBS}?limit=50`,
    ]);

    await act(async () => {
      await result.current.send("bob again");
    });
    expect(transport.requests[0]!.body.contextId).toBe(BOBS);

    // A user without a conversation starts empty, and gets one on first send.
    rerender({ userId: "carol" });
    expect(result.current.turns).toEqual([]);
    expect(result.current.contextRef.current).toBeNull();
    await act(async () => {
      await result.current.send("hello");
    });
    expect(storageContents()).toEqual({
      "thinwire:demo:alice:contextId": ALICES,
      "thinwire:demo:bob:contextId": BOBS,
      "thinwire:demo:carol:contextId": NEW_1,
    });
  });

  it("reset clears the stored id and the view", async () => {
    localStorage.setItem(contextStorageKey("demo", "alice"), ALICES);
    const { transport, fetch } = fakeServer({ [ALICES]: transcript(ALICES, "Hi", "Hello") });
    const onContext = vi.fn();
    const { result } = renderHook(() =>
      useAgent({ agent: "demo", transport, fetch, persist: { userId: "alice" }, onContext }),
    );
    await waitFor(() => expect(result.current.turns).toHaveLength(2));
    act(() => result.current.reset());
    expect(storageContents()).toEqual({});
    expect(result.current.turns).toEqual([]);
    expect(result.current.contextRef.current).toBeNull();
    expect(onContext.mock.calls).toEqual([[null]]);
  });

  it("forgets a stored id the server does not know", async () => {
    localStorage.setItem(contextStorageKey("demo", "alice"), "ctx-" + "9".repeat(36));
    const { transport, fetch } = fakeServer();
    const { result } = renderHook(() => useAgent({ agent: "demo", transport, fetch, persist: { userId: "alice" } }));
    await waitFor(() => expect(fetch).toHaveBeenCalledTimes(1));
    await waitFor(() => expect(storageContents()).toEqual({}));
    expect(result.current.status).toBe("idle");
    expect(result.current.error).toBeNull();
  });

  it("forgets the stored id once a send finds the conversation deleted elsewhere, and sends the next in a new one", async () => {
    localStorage.setItem(contextStorageKey("demo", "alice"), ALICES);
    const server = fakeServer({ [ALICES]: transcript(ALICES, "Hi", "Hello") });
    const transport = new MockTransport((request) => {
      if (request.body.contextId === ALICES) throw new ThinwireError("context_not_found", "Unknown.", { status: 404 });
      return server.transport.run(request);
    });
    const { result } = renderHook(() => useAgent({ agent: "demo", transport, fetch: server.fetch, persist: { userId: "alice" } }));
    await waitFor(() => expect(result.current.turns).toHaveLength(2));
    let refused: unknown = null;
    await act(async () => {
      refused = await result.current.send("still there?").catch((error: unknown) => error);
    });
    expect(refused).toMatchObject({ code: "context_not_found" });
    expect(storageContents()).toEqual({});
    expect(result.current.contextRef.current).toBeNull();
    expect(result.current).toMatchObject({ turns: [], status: "error", error: { code: "context_not_found" } });
    await act(async () => {
      await result.current.send("hi");
    });
    expect(transport.requests[1]!.body.contextId).toBeUndefined();
    expect(storageContents()).toEqual({ "thinwire:demo:alice:contextId": NEW_1 });
  });

  it("forgets a malformed stored id without a request, and sends in a new conversation", async () => {
    localStorage.setItem(contextStorageKey("demo", "alice"), "ctx-2f77…");
    const { transport, fetch } = fakeServer();
    const onError = vi.fn();
    const { result } = renderHook(() => useAgent({ agent: "demo", transport, fetch, persist: { userId: "alice" }, onError }));
    await waitFor(() => expect(storageContents()).toEqual({}));
    expect(fetch).not.toHaveBeenCalled();
    expect(result.current).toMatchObject({ status: "idle", error: null, turns: [] });
    expect(result.current.contextRef.current).toBeNull();
    await act(async () => {
      await result.current.send("hi");
    });
    expect(transport.requests[0]!.body.contextId).toBeUndefined();
    expect(storageContents()).toEqual({ "thinwire:demo:alice:contextId": NEW_1 });
    expect(onError).not.toHaveBeenCalled();
  });

  it("uses a custom storage and the latest onContext callback", async () => {
    const { transport, fetch } = fakeServer();
    const storage = new Map<string, string>();
    const fakeStorage = {
      getItem: (key: string) => storage.get(key) ?? null,
      setItem: (key: string, value: string) => void storage.set(key, value),
      removeItem: (key: string) => void storage.delete(key),
    } as Storage;
    const first = vi.fn();
    const second = vi.fn();
    const { result, rerender } = renderHook(
      ({ onContext }: { onContext: (id: string | null) => void }) =>
        useAgent({ agent: "demo", transport, fetch, persist: { userId: "u1", storage: fakeStorage }, onContext }),
      { initialProps: { onContext: first } },
    );
    const client = result.current.send;
    rerender({ onContext: second });
    expect(result.current.send).toBe(client); // same client across renders
    await act(async () => {
      await result.current.send("hi");
    });
    expect(first).not.toHaveBeenCalled();
    expect(second.mock.calls).toEqual([[NEW_1]]);
    expect([...storage]).toEqual([["thinwire:demo:u1:contextId", NEW_1]]);
    expect(storageContents()).toEqual({});
  });

  it("sends the latest headers and never stores anything without persist", async () => {
    const { transport, fetch } = fakeServer();
    const { result, rerender } = renderHook(
      ({ token }: { token: string }) =>
        useAgent({ agent: "demo", transport, fetch, headers: { authorization: `Bearer ${token}` } }),
      { initialProps: { token: "one" } },
    );
    rerender({ token: "two" });
    await act(async () => {
      await result.current.send("hi");
    });
    expect(transport.requests[0]!.headers).toEqual({ authorization: "Bearer two", "Thinwire-Protocol": "1" });
    expect(storageContents()).toEqual({});
  });

  it("resumes the same conversation when an <Activity> is hidden and shown again", async () => {
    const { transport, fetch } = fakeServer({ [NEW_1]: transcript(NEW_1, "hi", "echo: hi") });
    let view: UseAgentResult | null = null;
    function Chat() {
      view = useAgent({ agent: "demo", transport, fetch });
      return null;
    }
    const { rerender } = render(
      <Activity mode="visible">
        <Chat />
      </Activity>,
    );
    await act(async () => {
      await view!.send("hi");
    });
    rerender(
      <Activity mode="hidden">
        <Chat />
      </Activity>,
    );
    await act(async () => {
      await Promise.resolve();
    });
    rerender(
      <Activity mode="visible">
        <Chat />
      </Activity>,
    );
    await waitFor(() => expect(view!.status).toBe("idle"));
    expect(view!.contextRef.current).toBe(NEW_1);
    // Hiding ran the effect cleanup; the replacement client hydrated from the server.
    expect(fetch).toHaveBeenCalledTimes(1);
    expect(view!.turns.map((turn) => turn.text)).toEqual(["hi", "echo: hi"]);
    await act(async () => {
      await view!.send("more");
    });
    expect(transport.requests[1]!.body.contextId).toBe(NEW_1);
  });

  it("aborts the run in flight on unmount", async () => {
    const stream = channel();
    let signal: AbortSignal | undefined;
    const transport: MockTransport = new MockTransport((request) => {
      signal = request.signal;
      return stream.frames();
    });
    const { result, unmount } = renderHook((props: UseAgentOptions) => useAgent(props), {
      initialProps: { agent: "demo", transport },
      reactStrictMode: true,
    });
    let sent!: Promise<unknown>;
    act(() => {
      sent = result.current.send("hi");
    });
    unmount();
    await expect(sent).rejects.toMatchObject({ code: "aborted" });
    expect(signal?.aborted).toBe(true);
  });
});

describe("useAgent streaming", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.restoreAllMocks();
  });

  // A display of `hz`: frames every 1000/hz ms of a clock the test moves.
  it.each([
    { hz: 60, framesPerCommit: 1 },
    { hz: 120, framesPerCommit: 2 },
  ])("commits at most once per frame and 60 times a second at $hz Hz, and shows the whole reply", async ({
    hz,
    framesPerCommit,
  }) => {
    let clock = 1000;
    vi.spyOn(performance, "now").mockImplementation(() => clock);
    const callbacks: FrameRequestCallback[] = [];
    vi.stubGlobal("requestAnimationFrame", (callback: FrameRequestCallback) => callbacks.push(callback));
    vi.stubGlobal("cancelAnimationFrame", () => undefined);
    let framesFired = 0;
    const fireFrame = () => {
      clock += 1000 / hz;
      const due = callbacks.splice(0);
      if (due.length > 0) framesFired += 1;
      for (const callback of due) callback(clock);
    };

    const stream = channel();
    const transport = new MockTransport(() => stream.frames());
    let commits = 0;
    let view: UseAgentResult | null = null;
    function Chat() {
      view = useAgent({ agent: "demo", transport });
      return <p>{view.turns[1]?.text}</p>;
    }
    const { container } = render(
      <Profiler id="chat" onRender={() => (commits += 1)}>
        <Chat />
      </Profiler>,
    );
    let sent!: Promise<unknown>;
    act(() => {
      sent = view!.send("Count");
    });
    const commitsBefore = commits;
    framesFired = 0;

    // Outside act(), so React commits as it would in a browser rather than once per act scope.
    const actEnvironment = globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean };
    const previous = actEnvironment.IS_REACT_ACT_ENVIRONMENT;
    actEnvironment.IS_REACT_ACT_ENVIRONMENT = false;
    const macrotask = () => new Promise((resolve) => setTimeout(resolve, 0));
    let seq = 1;
    const ids = () => ({ contextId: "ctx-1", runId: "run-1", seq: seq++ });
    let expected = "";
    try {
      stream.push({ ...ids(), type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false });
      for (let batch = 0; batch < 20; batch++) {
        for (let index = 0; index < 25; index++) {
          const delta = `${batch * 25 + index} `;
          expected += delta;
          stream.push({ ...ids(), type: "token", delta });
          if (index % 5 === 4) await Promise.resolve();
        }
        await macrotask(); // the client reads all it was sent
        fireFrame();
        await macrotask();
      }
      stream.push({ ...ids(), type: "done", text: expected, toolCalls: [], stopReason: "end" });
      await sent;
      await macrotask();
    } finally {
      actEnvironment.IS_REACT_ACT_ENVIRONMENT = previous;
    }
    const streamingCommits = commits - commitsBefore;
    // One commit per frame (per other frame at 120 Hz), plus the end of the run (a status
    // change is never deferred).
    expect(framesFired).toBeGreaterThanOrEqual(10);
    expect(framesFired).toBeLessThanOrEqual(20);
    expect(streamingCommits).toBeLessThanOrEqual(Math.ceil(framesFired / framesPerCommit) + 2);
    expect(streamingCommits).toBeGreaterThanOrEqual(Math.floor(framesFired / framesPerCommit) - 1);
    expect(view!.status).toBe("idle");
    expect(view!.turns[1]?.text).toBe(expected);
    expect(container.textContent).toBe(expected);
  });

  it("keeps a hidden tab's view current, where animation frames are paused", async () => {
    vi.stubGlobal("requestAnimationFrame", () => 0); // frames never come, as in a hidden tab
    const visibility = vi.spyOn(document, "visibilityState", "get").mockReturnValue("hidden");
    try {
      const stream = channel();
      const transport = new MockTransport(() => stream.frames());
      const { result } = renderHook(() => useAgent({ agent: "demo", transport }));
      act(() => {
        void result.current.send("Hi").catch(() => undefined);
      });
      stream.push({ contextId: "ctx-1", runId: "run-1", seq: 1, type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false });
      stream.push({ contextId: "ctx-1", runId: "run-1", seq: 2, type: "token", delta: "Hel" });
      await waitFor(() => expect(result.current.turns[1]?.text).toBe("Hel"));
      expect(result.current.status).toBe("streaming");
    } finally {
      visibility.mockRestore();
    }
  });

  it("stops the reply being streamed", async () => {
    const stream = channel();
    let seq = 1;
    const ids = () => ({ contextId: "ctx-1", runId: "run-1", seq: seq++ });
    const transport = new MockTransport(() => stream.frames(), {
      stop: () => {
        stream.push({ ...ids(), type: "done", text: "Par", toolCalls: [], stopReason: "stopped" });
        stream.end();
      },
    });
    const { result } = renderHook(() => useAgent({ agent: "demo", transport }));
    let sent!: Promise<SendResult>;
    act(() => {
      sent = result.current.send("Long story");
    });
    await act(async () => {
      stream.push({ ...ids(), type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false });
      stream.push({ ...ids(), type: "token", delta: "Par" });
      await new Promise((resolve) => setTimeout(resolve, 0));
    });
    await act(async () => {
      await result.current.stop();
    });
    await act(async () => {
      expect((await sent).stopReason).toBe("stopped");
    });
    expect(transport.stops.map((request) => request.contextId)).toEqual(["ctx-1"]);
    expect(result.current.status).toBe("idle");
    expect(result.current.turns[1]).toMatchObject({ text: "Par", stopReason: "stopped" });
  });

  it('talks over a WebSocket at the page origin with transport: "websocket"', async () => {
    const log = newLog();
    let minted = 0;
    const { WebSocket, sockets } = fakeWebSocket(
      {
        run: (body) => {
          const contextId = body.contextId ?? `ctx-ws-${++minted}`;
          return { frames: frames(contextId, "run-1", `echo: ${body.message.text}`) };
        },
      },
      log,
    );
    vi.stubGlobal("WebSocket", WebSocket);
    const { result, unmount } = renderHook(() => useAgent({ agent: "demo", transport: "websocket" }));
    await act(async () => {
      expect((await result.current.send("hi")).text).toBe("echo: hi");
    });
    expect(result.current.turns.map((turn) => turn.text)).toEqual(["hi", "echo: hi"]);
    expect(sockets).toHaveLength(1);
    expect(sockets[0]!.url).toBe(`ws://${window.location.host}/agents/demo/ws`);
    expect(sockets[0]!.sent).toEqual([
      { type: "send", message: { text: "hi" }, messageId: expect.any(String), requestId: expect.any(String) },
    ]);
    unmount();
    await act(async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
    });
    expect(sockets[0]!.readyState).toBe(3); // closed with its client
  });
});

describe("useAgent decisions", () => {
  it("exposes the pending interrupt and answers it with decide", async () => {
    const interrupt = {
      interruptId: "int-1",
      prompt: "Refund $40?",
      options: ["approve", "reject"],
      payload: { order: "1234" },
      decisionSchema: null,
    };
    let seq = 1;
    const ids = (runId: string) => ({ contextId: "ctx-1", runId, seq: seq++ });
    const transport = new MockTransport(
      () => [
        { ...ids("run-1"), type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false },
        { ...ids("run-1"), type: "interrupt", interrupt },
        { ...ids("run-1"), type: "done", text: "Checking.", toolCalls: [], stopReason: "interrupted" },
      ],
      {
        decide: () => [
          { ...ids("run-2"), type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false },
          { ...ids("run-2"), type: "done", text: "Refunded.", toolCalls: [], stopReason: "end" },
        ],
      },
    );
    const { result } = renderHook(() => useAgent({ agent: "demo", transport }));
    expect(result.current.interrupt).toBeNull();
    await act(async () => {
      expect((await result.current.send("Refund order 1234")).stopReason).toBe("interrupted");
    });
    expect(result.current.interrupt).toEqual(interrupt);
    await act(async () => {
      expect((await result.current.decide("approve")).text).toBe("Refunded.");
    });
    expect(transport.decisions.map((request) => [request.interruptId, request.value])).toEqual([["int-1", "approve"]]);
    expect(result.current.interrupt).toBeNull();
    expect(result.current.turns.map((turn) => turn.text)).toEqual(["Refund order 1234", "Checking.", "Refunded."]);
  });

  it("ends a reply that asked before saying anything as an empty turn, and answers in a new one (as hook.md says)", async () => {
    const [asking, answering] = [runFrames("ctx-1", "run-1"), runFrames("ctx-1", "run-2", 10)];
    const transport = new MockTransport(() => [asking.start(), asking.interrupt(refund), asking.done("", [], "interrupted")], {
      decide: () => [answering.start(), answering.token("Refunded."), answering.done("Refunded.")],
    });
    const { result } = renderHook(() => useAgent({ agent: "demo", transport }));
    await act(async () => void (await result.current.send("Refund order 1234")));
    await act(async () => void (await result.current.decide("approve")));
    const shown = result.current.turns.map(({ role, text, thinking, activity, stopReason }) => [role, text, thinking, activity.length, stopReason]);
    expect(shown).toEqual([
      ["user", "Refund order 1234", "", 0, null],
      ["assistant", "", "", 0, "interrupted"], // nothing to show: the docs' Chat skips it
      ["assistant", "Refunded.", "", 0, "end"],
    ]);
  });
});

describe("useAgent after an error", () => {
  afterEach(() => cleanup());

  /** Runs: the first fails on the server (agent_error), the next are answered. */
  function failingOnce() {
    let count = 0;
    return new MockTransport(() => {
      count += 1;
      const r = runFrames("ctx-1", `run-${count}`, count * 10);
      if (count === 1) return [r.start(), r.error("agent_error", "The agent failed."), r.done("", [], "error")];
      return [r.start(), r.token("Fine."), r.done("Fine.")];
    });
  }

  // The docs' Chat: Send is disabled only while a reply streams.
  function Chat({ transport, onError }: { transport: MockTransport; onError?: UseAgentOptions["onError"] }) {
    const { turns, status, error, send, clearError } = useAgent({ agent: "demo", transport, onError });
    return (
      <main>
        {turns.map((turn) => (
          <p key={turn.id}>{turn.text}</p>
        ))}
        {error && (
          <div role="alert">
            {error.code}
            <button onClick={clearError}>Dismiss</button>
          </div>
        )}
        <span data-testid="status">{status}</span>
        <button
          disabled={status === "streaming" || status === "reconnecting"}
          onClick={() => void send("Hello!").catch(() => undefined)}
        >
          Send
        </button>
      </main>
    );
  }

  it("keeps Send enabled after an error, and a new send clears it", async () => {
    const onError = vi.fn();
    render(<Chat transport={failingOnce()} onError={onError} />);
    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("error"));
    expect(screen.getByRole("alert").textContent).toContain("agent_error");
    expect(onError.mock.calls).toEqual([[{ code: "agent_error", message: "The agent failed.", retryable: false }]]);
    expect((screen.getByText("Send") as HTMLButtonElement).disabled).toBe(false);

    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(screen.getByText("Fine.")).toBeTruthy());
    expect(screen.getByTestId("status").textContent).toBe("idle");
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("clearError dismisses the error and returns to idle", async () => {
    render(<Chat transport={failingOnce()} />);
    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("error"));
    fireEvent.click(screen.getByText("Dismiss"));
    expect(screen.getByTestId("status").textContent).toBe("idle");
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("loads a conversation again when its failed load is dismissed, instead of a blank chat", async () => {
    let down = true;
    const fetch = vi.fn(async () =>
      down
        ? new Response("<html>bad gateway</html>", { status: 502 })
        : new Response(JSON.stringify(transcript(ALICES, "Hello", "Hi there")), { headers: { "content-type": "application/json" } }),
    );
    function Stored() {
      const { turns, status, error, clearError } = useAgent({ agent: "demo", contextId: ALICES, fetch, reconnect: { attempts: 0 } });
      return (
        <main>
          {turns.map((turn) => <p key={turn.id}>{turn.text}</p>)}
          {error && <button onClick={clearError}>Dismiss {error.code}</button>}
          <span data-testid="status">{status}</span>
        </main>
      );
    }
    render(<Stored />);
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("error"));
    down = false;
    fireEvent.click(screen.getByText("Dismiss http_error"));
    expect(screen.getByTestId("status").textContent).toBe("hydrating");
    await waitFor(() => expect(screen.getByText("Hi there")).toBeTruthy());
    expect(screen.getByTestId("status").textContent).toBe("idle");
    expect(fetch).toHaveBeenCalledTimes(2);
  });

  it("calls the latest onFinish and onError", async () => {
    const transport = new MockTransport(() => {
      throw new ThinwireError("message_too_large", "Too long.", { status: 413 });
    });
    const firstError = vi.fn();
    const secondError = vi.fn();
    const { result, rerender } = renderHook(
      ({ onError }: { onError: (error: unknown) => void }) => useAgent({ agent: "demo", transport, onError }),
      { initialProps: { onError: firstError } },
    );
    rerender({ onError: secondError });
    let caught: unknown;
    await act(async () => {
      caught = await result.current.send("x").catch((error: unknown) => error);
    });
    expect(firstError).not.toHaveBeenCalled();
    expect(secondError.mock.calls).toEqual([[caught]]);

    const onFinish = vi.fn();
    const answering = new MockTransport(() => {
      const r = runFrames("ctx-1", "run-1");
      return [r.start(), r.done("ok")];
    });
    const { result: finishing } = renderHook(() => useAgent({ agent: "demo", transport: answering, onFinish }));
    let finished: SendResult | null = null;
    await act(async () => {
      finished = await finishing.current.send("hi");
    });
    expect(onFinish.mock.calls).toEqual([[finished]]);
  });
});

describe("useAgent once a reply is over", () => {
  afterEach(() => cleanup());

  it("takes a send from onFinish: a queue of messages, each sent as the reply before it ends", async () => {
    const { fetch, transport } = fakeServer();
    const queued = ["two", "three"];
    const sends: Array<Promise<SendResult>> = [];
    const { result } = renderHook(() =>
      useAgent({
        agent: "demo",
        fetch,
        transport,
        onFinish: () => {
          const next = queued.shift();
          if (next !== undefined) sends.push(result.current.send(next));
        },
      }),
    );
    await act(async () => {
      await result.current.send("one");
    });
    await waitFor(() => expect(sends).toHaveLength(2));
    await act(async () => {
      await Promise.all(sends);
    });
    expect(result.current.turns.map((turn) => turn.text)).toEqual(["one", "echo: one", "two", "echo: two", "three", "echo: three"]);
    expect(result.current.status).toBe("idle");
  });
});

describe("useAgent requests", () => {
  it("sends data with the message", async () => {
    const transport = new MockTransport(() => {
      const r = runFrames("ctx-1", "run-1");
      return [r.start(), r.done("ok")];
    });
    const { result } = renderHook(() => useAgent({ agent: "demo", transport }));
    await act(async () => {
      await result.current.send("Which order?", { data: { orderId: "1234" } });
    });
    expect(transport.requests[0]!.body).toEqual({
      messageId: expect.any(String),
      message: { text: "Which order?" },
      data: { orderId: "1234" },
    });
  });

  it("uses the credentials option for every request", async () => {
    const calls: Array<[string, RequestCredentials | undefined]> = [];
    const r = runFrames("ctx-111111111111111111111111111111111111", "run-1", 10);
    const script: Script = {
      run: () => ({ frames: [r.start({ afterTurnId: turnId("ctx-111111111111111111111111111111111111", "a", 0) }), r.done("ok")] }),
      transcript: (contextId) => transcript(contextId, "hi", "hello"),
    };
    const serve = fakeFetch(script, newLog());
    const fetch: typeof globalThis.fetch = (input, init) => {
      calls.push([String(input), init?.credentials]);
      return serve(input, init);
    };
    const { result } = renderHook(() =>
      useAgent({ agent: "demo", baseUrl: "https://api.test", contextId: "ctx-111111111111111111111111111111111111", fetch, credentials: "include" }),
    );
    await waitFor(() => expect(result.current.turns).toHaveLength(2));
    await act(async () => {
      await result.current.send("more");
    });
    expect(calls).toEqual([
      ["https://api.test/agents/demo/contexts/ctx-111111111111111111111111111111111111?limit=50", "include"],
      ["https://api.test/agents/demo/runs", "include"],
    ]);
  });

  it("opens a WebSocket with a ticket when it sends headers", async () => {
    const log = newLog();
    const script: Script = {
      requireTicket: true,
      run: (body) => {
        const r = runFrames("ctx-1", "run-1");
        return { frames: [r.start(), r.done(`echo: ${body.message.text}`)] };
      },
    };
    const { WebSocket, sockets } = fakeWebSocket(script, log);
    vi.stubGlobal("WebSocket", WebSocket);
    try {
      const { result, unmount } = renderHook(() =>
        useAgent({
          agent: "demo",
          transport: "websocket",
          fetch: fakeFetch(script, log),
          headers: { authorization: "Bearer t" },
        }),
      );
      await act(async () => {
        expect((await result.current.send("hi")).text).toBe("echo: hi");
      });
      expect(sockets[0]!.url).toBe(`ws://${window.location.host}/agents/demo/ws?ticket=ticket-1`);
      expect(log.tickets[0]).toMatchObject({ authorization: "Bearer t" });
      unmount();
    } finally {
      vi.unstubAllGlobals();
    }
  });
});

describe("useAgent pages", () => {
  it("shows the last page, hasEarlier, and a stable loadEarlier that shows the page before", async () => {
    const serve = fakeFetch(conversationScript(), newLog());
    const urls: string[] = [];
    const fetch: typeof globalThis.fetch = (input, init) => {
      urls.push(String(input));
      return serve(input, init);
    };
    const writer = new AgentClient({ agent: "demo", fetch });
    for (const text of ["one", "two", "three"]) await writer.send(text);
    const contextId = writer.getSnapshot().contextId;
    writer.dispose();
    urls.length = 0;

    const { result, rerender } = renderHook(() => useAgent({ agent: "demo", fetch, contextId, pageSize: 2 }), {
      reactStrictMode: true,
    });
    await waitFor(() => expect(result.current.turns).toHaveLength(4));
    expect(result.current.hasEarlier).toBe(true);
    expect(urls).toEqual([`/agents/demo/contexts/${contextId}?limit=2`]);
    const { loadEarlier } = result.current;
    rerender();
    expect(result.current.loadEarlier).toBe(loadEarlier);

    await act(async () => {
      await result.current.loadEarlier();
    });
    expect(urls[1]).toMatch(/\?limit=2&before=turn-/);
    expect(result.current.turns.filter((turn) => turn.role === "user").map((turn) => turn.text)).toEqual(["one", "two", "three"]);
    expect(result.current.hasEarlier).toBe(false);
  });
});
