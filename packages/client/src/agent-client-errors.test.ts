/** AgentClient after a failure: clearError, a send from status error, and the onFinish / onError callbacks. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient, type AgentClientOptions } from "./agent-client.js";
import { ThinwireError } from "./errors.js";
import { refund } from "./test-helpers.js";
import { channel, MockTransport, runFrames as run } from "./testing/index.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** A transport whose first send is refused with `message_too_large`, and every later one answered. */
function refusingOnce() {
  let count = 0;
  return new MockTransport(() => {
    count += 1;
    if (count === 1) throw new ThinwireError("message_too_large", "Too long.", { status: 413 });
    const r = run("ctx-1", `run-${count}`, count * 10);
    return [r.start(), r.token("ok"), r.done("ok")];
  });
}

/** A run that fails on the server: an `error` frame, then `done` with stop reason error. */
function failingRun() {
  const r = run("ctx-1", "run-1");
  return [r.start(), r.token("Par"), r.error("agent_error", "The agent failed. Reference: err-1"), r.done("Par", [], "error")];
}

function recorder() {
  const calls: Array<["finish" | "error", unknown]> = [];
  const callbacks: Pick<AgentClientOptions, "onFinish" | "onError"> = {
    onFinish: (result) => calls.push(["finish", result]),
    onError: (error) => calls.push(["error", error]),
  };
  return { calls, callbacks };
}

describe("AgentClient.clearError", () => {
  it("dismisses the error of a failed run and goes back to idle", async () => {
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(failingRun) });
    expect((await client.send("hi")).stopReason).toBe("error");
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "agent_error" } });
    const listener = vi.fn();
    client.subscribe(listener);

    client.clearError();
    const cleared = client.getSnapshot();
    expect(cleared).toMatchObject({ status: "idle", error: null });
    // The turns stay as they were: the failed reply is still shown, ended as error.
    expect(cleared.turns.map((turn) => [turn.text, turn.stopReason])).toEqual([
      ["hi", null],
      ["Par", "error"],
    ]);
    expect(listener).toHaveBeenCalledTimes(1);

    // Nothing to clear: the same snapshot, no notification.
    client.clearError();
    expect(client.getSnapshot()).toBe(cleared);
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it("clears an error shown during a run without touching its status", async () => {
    const stream = channel();
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(() => stream.frames()) });
    const r = run("ctx-1", "run-1");
    const sent = client.send("hi");
    stream.push(r.start());
    stream.push(r.error("store_error", "Could not save.", true));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(client.getSnapshot()).toMatchObject({ status: "streaming", error: { code: "store_error" } });
    client.clearError();
    expect(client.getSnapshot()).toMatchObject({ status: "streaming", error: null });
    stream.push(r.done("ok"));
    await sent;
    expect(client.getSnapshot().status).toBe("idle");
  });

  it("dismisses a failed hydration by loading the conversation again", async () => {
    let tries = 0;
    const fetch = async () => {
      tries += 1;
      if (tries === 1) return jsonResponse(503, { error: { code: "store_unavailable", message: "Later.", retryable: true } });
      return jsonResponse(200, { contextId: CTX_1, agent: "demo", turns: [{ role: "user", text: "hi", toolCalls: [], stopReason: null }] });
    };
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, reconnect: { attempts: 0 } });
    await client.start();
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "store_unavailable" } });
    client.clearError();
    expect(client.getSnapshot()).toMatchObject({ status: "hydrating", error: null, contextId: CTX_1 });
    await vi.waitFor(() => expect(client.getSnapshot().status).toBe("idle"));
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["hi"]);
  });

  it("is a no-op once disposed", () => {
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(failingRun) });
    client.dispose();
    expect(() => client.clearError()).not.toThrow();
  });
});

describe("AgentClient with a baseUrl no thinwire server answers at", () => {
  it("shows an http_error naming the request, and keeps the conversation", async () => {
    const fetch = vi.fn(async () => new Response("<h1>Not Found</h1>", { status: 404, statusText: "Not Found" }));
    const onContext = vi.fn();
    const client = new AgentClient({ agent: "demo", baseUrl: "/nope", contextId: CTX_1, fetch, onContext });
    await client.start();
    const { status, error, contextId } = client.getSnapshot();
    expect({ status, code: error?.code, contextId }).toEqual({ status: "error", code: "http_error", contextId: CTX_1 });
    expect(error?.message).toBe(
      `HTTP 404 Not Found for GET /nope/agents/demo/contexts/${CTX_1}?limit=50: no thinwire server answers there; is baseUrl right?`,
    );
    expect(onContext).not.toHaveBeenCalledWith(null);
    client.dispose();
  });
});

describe("AgentClient send after an error", () => {
  it("is allowed from status error, and clears the error", async () => {
    const stream = channel();
    let count = 0;
    const transport = new MockTransport(() => {
      count += 1;
      if (count === 1) throw new ThinwireError("message_too_large", "Too long.", { status: 413 });
      return stream.frames();
    });
    const client = new AgentClient({ agent: "demo", transport });
    await expect(client.send("x".repeat(100))).rejects.toMatchObject({ code: "message_too_large" });
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "message_too_large" } });

    const sent = client.send("short");
    expect(client.getSnapshot()).toMatchObject({ status: "streaming", error: null });
    const r = run("ctx-1", "run-1");
    stream.push(r.start());
    stream.push(r.done("ok"));
    expect((await sent).text).toBe("ok");
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["short", "ok"]);
  });

  it("is allowed after a run that failed on the server", async () => {
    let count = 0;
    const transport = new MockTransport(() => {
      count += 1;
      if (count === 1) return failingRun();
      const r = run("ctx-1", "run-2", 10);
      return [r.start(), r.done("better")];
    });
    const client = new AgentClient({ agent: "demo", transport });
    await client.send("one");
    expect(client.getSnapshot().status).toBe("error");
    expect((await client.send("two")).text).toBe("better");
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
  });
});

describe("AgentClient onFinish and onError", () => {
  afterEach(() => vi.restoreAllMocks());

  it("calls onFinish with the result of every run, whatever its stop reason, before send resolves", async () => {
    let count = 0;
    const transport = new MockTransport(() => {
      count += 1;
      const r = run("ctx-1", `run-${count}`, count * 10);
      return [r.start(), r.done(`reply ${count}`, [], count === 1 ? "end" : "stopped")];
    });
    const { calls, callbacks } = recorder();
    const client = new AgentClient({ agent: "demo", transport, ...callbacks });
    const first = await client.send("one");
    expect(calls).toEqual([["finish", first]]);
    const second = await client.send("two");
    expect(second.stopReason).toBe("stopped");
    expect(calls).toEqual([
      ["finish", first],
      ["finish", second],
    ]);
  });

  it("calls onError with the run's error, then onFinish, for a run that ended with stop reason error", async () => {
    const { calls, callbacks } = recorder();
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(failingRun), ...callbacks });
    const result = await client.send("hi");
    expect(calls).toEqual([
      ["error", { code: "agent_error", message: "The agent failed. Reference: err-1", retryable: false }],
      ["finish", result],
    ]);
    expect(calls[0]![1]).toBe(client.getSnapshot().error);
  });

  it("calls onError with the ThinwireError a send rejects with", async () => {
    const { calls, callbacks } = recorder();
    const client = new AgentClient({ agent: "demo", transport: refusingOnce(), ...callbacks });
    const error = await client.send("too long").catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ThinwireError);
    expect(calls).toEqual([["error", error]]);
  });

  it("does not call them for refusals made before any request, nor for a cancelled send", async () => {
    const stream = channel();
    const { calls, callbacks } = recorder();
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(() => stream.frames()), ...callbacks });
    await expect(client.send("  ")).rejects.toMatchObject({ code: "invalid_request" });
    await expect(client.decide("approve")).rejects.toMatchObject({ code: "no_pending_interrupt" });
    const sent = client.send("one");
    await expect(client.send("two")).rejects.toMatchObject({ code: "context_busy" });
    client.reset();
    await expect(sent).rejects.toMatchObject({ code: "aborted" });
    expect(calls).toEqual([]);
  });

  it("reports decisions: a refused one to onError, the continued run to onFinish", async () => {
    const r = run("ctx-1", "run-1");
    let decisions = 0;
    const transport = new MockTransport(
      () => [r.start(), r.interrupt(refund), r.done("Checking.", [], "interrupted")],
      {
        decide: () => {
          decisions += 1;
          if (decisions === 1) throw new ThinwireError("invalid_decision", "Not an option.", { status: 400 });
          const next = run("ctx-1", "run-2", 10);
          return [next.start(), next.done("Refunded.")];
        },
      },
    );
    const { calls, callbacks } = recorder();
    const client = new AgentClient({ agent: "demo", transport, ...callbacks });
    const asked = await client.send("Refund order 1234");
    const refused = await client.decide("maybe").catch((caught: unknown) => caught);
    const decided = await client.decide("approve");
    expect(calls).toEqual([
      ["finish", asked],
      ["error", refused],
      ["finish", decided],
    ]);
    expect(asked.stopReason).toBe("interrupted");
  });

  it("reports the run start() found in progress, and a transcript it could not load", async () => {
    const r = run(CTX_1, "run-1");
    const transcript = { contextId: CTX_1, agent: "demo", turns: [{ role: "user", text: "hi", toolCalls: [], stopReason: null }], activeRunId: "run-1", pendingInterrupt: null };
    const transport = new MockTransport(() => [], { attach: () => [r.start(), r.token("Hel"), r.done("Hello")] });
    const { calls, callbacks } = recorder();
    const client = new AgentClient({
      agent: "demo",
      contextId: CTX_1,
      transport,
      fetch: async () => jsonResponse(200, transcript),
      ...callbacks,
    });
    await client.start();
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    expect(calls).toEqual([["finish", { text: "Hello", toolCalls: [], contextId: CTX_1, runId: "run-1", stopReason: "end" }]]);

    const unavailable = recorder();
    const failing = new AgentClient({
      agent: "demo",
      contextId: CTX_1,
      fetch: async () => jsonResponse(503, { error: { code: "store_unavailable", message: "Later.", retryable: true } }),
      reconnect: { attempts: 0 }, // the failure at once, not after the tries
      ...unavailable.callbacks,
    });
    await failing.start();
    expect(unavailable.calls).toEqual([["error", expect.objectContaining({ code: "store_unavailable", status: 503 })]]);
    expect(unavailable.calls[0]![1]).toBeInstanceOf(ThinwireError);

    // An id the server does not know is forgotten quietly.
    const forgotten = recorder();
    const unknown = new AgentClient({
      agent: "demo",
      contextId: CTX_1,
      fetch: async () => jsonResponse(404, { error: { code: "context_not_found", message: "No." } }),
      ...forgotten.callbacks,
    });
    await unknown.start();
    expect(forgotten.calls).toEqual([]);
  });

  it("reports a resumed run that failed", async () => {
    const transcript = { contextId: CTX_1, agent: "demo", turns: [], activeRunId: "run-1", pendingInterrupt: null };
    const transport = new MockTransport(() => [], {
      attach: () => {
        throw new ThinwireError("unauthenticated", "Sign in.", { status: 401 });
      },
    });
    const { calls, callbacks } = recorder();
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, transport, fetch: async () => jsonResponse(200, transcript), ...callbacks });
    await client.start();
    await vi.waitFor(() => expect(calls).toHaveLength(1));
    expect(calls[0]).toEqual(["error", expect.objectContaining({ code: "unauthenticated" })]);
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "unauthenticated" } });
  });

  it("uses the callbacks the options hold at the time", async () => {
    const transport = new MockTransport(() => {
      const r = run("ctx-1", "run-1");
      return [r.start(), r.done("ok")];
    });
    const first = vi.fn();
    const second = vi.fn();
    const options: AgentClientOptions = { agent: "demo", transport, onFinish: first };
    const client = new AgentClient(options);
    options.onFinish = second;
    await client.send("hi");
    expect(first).not.toHaveBeenCalled();
    expect(second).toHaveBeenCalledTimes(1);
  });

  it("keeps a send whole when a callback throws, and reports the throw on its own", async () => {
    const queued: Array<() => void> = [];
    vi.spyOn(globalThis, "queueMicrotask").mockImplementation((task) => void queued.push(task));
    const transport = new MockTransport(() => {
      const r = run("ctx-1", "run-1");
      return [r.start(), r.done("ok")];
    });
    const client = new AgentClient({
      agent: "demo",
      transport,
      onFinish: () => {
        throw new Error("app bug");
      },
    });
    expect((await client.send("hi")).text).toBe("ok");
    expect(client.getSnapshot().status).toBe("idle");
    expect(queued).toHaveLength(1);
    expect(() => queued[0]!()).toThrow("app bug");
  });
});
