/** AgentClient loading a transcript while the server is briefly down: tried again, and loaded again once given up. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import { ThinwireError } from "./errors.js";
import type { Transcript } from "./generated/wire.js";
import { channel, MockTransport, runFrames as run, transcriptTurn } from "./testing/index.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);
const CTX_2 = "ctx-" + "2".repeat(36);

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

function refusal(status: number, code: string, retryable?: boolean): Response {
  return jsonResponse(status, { error: { code, message: code, ...(retryable === undefined ? {} : { retryable }) } });
}

function transcript(contextId: string): Transcript {
  return {
    contextId,
    agent: "demo",
    title: "Weather",
    turns: [
      transcriptTurn("user", "Weather?", { id: "turn-u1" }),
      transcriptTurn("assistant", "Sunny.", { id: "turn-a2" }),
    ],
    activeRunId: null,
    pendingInterrupt: null,
    hasEarlier: false,
  };
}

/**
 * A fetch whose answers to transcript requests are `failures` in turn (a
 * Response, or an error it throws), then the conversation's transcript; the
 * requests it got are in `urls`.
 */
function flakyServer(failures: Array<Response | Error>) {
  const urls: string[] = [];
  const fetch = vi.fn(async (input: RequestInfo | URL) => {
    const url = String(input);
    urls.push(url);
    const failure = failures.shift();
    if (failure instanceof Error) throw failure;
    if (failure) return failure;
    const contextId = decodeURIComponent(url.split("/contexts/")[1]!.split("?")[0]!);
    return jsonResponse(200, transcript(contextId));
  });
  return { fetch, urls };
}

const texts = (client: AgentClient) => client.getSnapshot().turns.map((turn) => turn.text);

/** The statuses seen, each once per change. */
const changes = (statuses: string[]) => statuses.filter((status, index) => status !== statuses[index - 1]);

afterEach(() => vi.useRealTimers());

describe("AgentClient hydration retry", () => {
  it("loads a transcript again with the reconnect backoff, status hydrating meanwhile", async () => {
    vi.useFakeTimers();
    const { fetch, urls } = flakyServer([new TypeError("Failed to fetch"), new Response("<html>bad gateway</html>", { status: 502 })]);
    const onError = vi.fn();
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, onError });
    const statuses: string[] = [];
    client.subscribe(() => statuses.push(client.getSnapshot().status));
    const started = client.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(urls).toHaveLength(1);
    expect(client.getSnapshot()).toMatchObject({ status: "hydrating", error: null });
    await vi.advanceTimersByTimeAsync(249);
    expect(urls).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1); // 250 ms
    expect(urls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(499);
    expect(urls).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1); // doubled
    await started;
    expect(urls).toEqual(Array(3).fill(`/agents/demo/contexts/${CTX_1}?limit=50`));
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null, contextId: CTX_1, title: "Weather" });
    expect(texts(client)).toEqual(["Weather?", "Sunny."]);
    expect(changes(statuses)).toEqual(["hydrating", "idle"]);
    expect(onError).not.toHaveBeenCalled();
  });

  it.each([
    ["network_error", () => new TypeError("Failed to fetch")],
    ["a proxy's 502", () => new Response("<html>bad gateway</html>", { status: 502 })],
    ["503 store_unavailable", () => refusal(503, "store_unavailable", true)],
    ["500 internal_error", () => refusal(500, "internal_error", false)],
    ["429 rate_limited", () => refusal(429, "rate_limited", true)],
  ])("tries again after %s", async (_name, failure) => {
    const { fetch, urls } = flakyServer([failure()]);
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, reconnect: { baseDelayMs: 1 } });
    await client.start();
    expect(urls).toHaveLength(2);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(texts(client)).toEqual(["Weather?", "Sunny."]);
  });

  it.each([
    ["401 unauthenticated", () => refusal(401, "unauthenticated", false), { status: "error", contextId: CTX_1 }],
    ["403 forbidden", () => refusal(403, "forbidden"), { status: "error", contextId: CTX_1 }],
    ["404 context_not_found (forgotten)", () => refusal(404, "context_not_found"), { status: "idle", contextId: null }],
    ["400 invalid_context_id (forgotten)", () => refusal(400, "invalid_context_id"), { status: "idle", contextId: null }],
  ])("does not try again after %s", async (_name, failure, shown) => {
    const { fetch, urls } = flakyServer([failure()]);
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, reconnect: { baseDelayMs: 1 } });
    await client.start();
    expect(urls).toHaveLength(1);
    expect(client.getSnapshot()).toMatchObject(shown);
  });

  it("gives up after the configured attempts: the last failure shown, and told once", async () => {
    const { fetch, urls } = flakyServer([
      new TypeError("Failed to fetch"),
      new TypeError("Failed to fetch"),
      refusal(503, "store_unavailable", true),
    ]);
    const onError = vi.fn();
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, onError, reconnect: { attempts: 2, baseDelayMs: 1 } });
    await client.start();
    expect(urls).toHaveLength(3);
    expect(client.getSnapshot()).toMatchObject({
      status: "error",
      error: { code: "store_unavailable", retryable: true },
      contextId: CTX_1,
      turns: [],
    });
    expect(onError.mock.calls).toEqual([[expect.objectContaining({ code: "store_unavailable", status: 503 })]]);
    expect(onError.mock.calls[0]![0]).toBeInstanceOf(ThinwireError);
  });

  it.each(["reset", "open", "dispose"] as const)("stops trying at once on %s", async (change) => {
    vi.useFakeTimers();
    const { fetch, urls } = flakyServer([new TypeError("Failed to fetch")]);
    const onError = vi.fn();
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, onError });
    const started = client.start();
    await vi.advanceTimersByTimeAsync(100); // waiting to try again
    expect(urls).toHaveLength(1);
    if (change === "reset") client.reset();
    if (change === "open") void client.open(CTX_2);
    if (change === "dispose") client.dispose();
    await started;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(urls.filter((url) => url.includes(CTX_1))).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
    expect(onError).not.toHaveBeenCalled();
    if (change === "open") expect(client.getSnapshot()).toMatchObject({ contextId: CTX_2, status: "idle" });
    if (change === "reset") expect(client.getSnapshot()).toMatchObject({ contextId: null, status: "idle", turns: [] });
  });
});

describe("AgentClient after a transcript that did not load", () => {
  /** A client that gave up loading CTX_1 (no retries), and whose next load succeeds. */
  async function givenUp(options: { transport?: MockTransport } = {}) {
    const server = flakyServer([refusal(503, "store_unavailable", true)]);
    const onError = vi.fn();
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, reconnect: { attempts: 0 }, onError, ...server, ...options });
    await client.start();
    expect(client.getSnapshot()).toMatchObject({ status: "error", contextId: CTX_1, turns: [] });
    return { client, onError, ...server };
  }

  it("loads it again on clearError, instead of a blank chat that looks new", async () => {
    const { client, urls } = await givenUp();
    const statuses: string[] = [];
    client.subscribe(() => statuses.push(client.getSnapshot().status));
    client.clearError();
    expect(client.getSnapshot()).toMatchObject({ status: "hydrating", error: null, contextId: CTX_1 });
    await client.start(); // the load in flight
    expect(urls).toHaveLength(2);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null, contextId: CTX_1 });
    expect(texts(client)).toEqual(["Weather?", "Sunny."]);
    expect(changes(statuses)).toEqual(["hydrating", "idle"]);
  });

  it("loads it again on clearError called by onError", async () => {
    const server = flakyServer([refusal(503, "store_unavailable", true)]);
    let client!: AgentClient;
    const onError = vi.fn(() => client.clearError());
    client = new AgentClient({ agent: "demo", contextId: CTX_1, reconnect: { attempts: 0 }, onError, ...server });
    await client.start();
    expect(client.getSnapshot().status).toBe("hydrating");
    await vi.waitFor(() => expect(client.getSnapshot().status).toBe("idle"));
    expect(texts(client)).toEqual(["Weather?", "Sunny."]);
    expect(onError).toHaveBeenCalledTimes(1);
  });

  it("loads it again on open of the same id, whatever the status", async () => {
    // A run that follows no turn and names the conversation: nothing makes the client read the transcript.
    const r = run(CTX_1, "run-1");
    const transport = new MockTransport(() => [r.start(), r.title("Weather"), r.token("Hi"), r.done("Hi")]);
    const { client, urls } = await givenUp({ transport });
    await client.send("Hello");
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(texts(client)).toEqual(["Hello", "Hi"]);
    expect(urls).toHaveLength(1);

    await client.open(CTX_1);
    expect(urls).toHaveLength(2);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", contextId: CTX_1 });
    expect(texts(client)).toEqual(["Weather?", "Sunny."]);
    await client.open(CTX_1); // loaded now: nothing happens
    expect(urls).toHaveLength(2);
  });

  it("forgets that once a load succeeded: clearError then only dismisses", async () => {
    const transport = new MockTransport(() => {
      throw new ThinwireError("message_too_large", "Too long.", { status: 413 });
    });
    const { client, urls } = await givenUp({ transport });
    await client.open(CTX_1);
    expect(urls).toHaveLength(2);
    await expect(client.send("x".repeat(100))).rejects.toMatchObject({ code: "message_too_large" });
    expect(client.getSnapshot().status).toBe("error");
    client.clearError();
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(texts(client)).toEqual(["Weather?", "Sunny."]);
    expect(urls).toHaveLength(2);
  });

  it("forgets that once a send's refresh showed the transcript", async () => {
    let sends = 0;
    const transport = new MockTransport(() => {
      sends += 1;
      if (sends > 1) throw new ThinwireError("message_too_large", "Too long.", { status: 413 });
      // The run follows the transcript's last turn, which the view never showed: it loads the transcript.
      const r = run(CTX_1, "run-1");
      return [r.start({ afterTurnId: "turn-a2" }), r.token("Hi"), r.done("Hi")];
    });
    const { client, urls } = await givenUp({ transport });
    await client.send("Hello");
    expect(urls).toHaveLength(2);
    expect(texts(client)).toEqual(["Weather?", "Sunny."]); // the fake transcript's; the server's would hold the new exchange
    await expect(client.send("x".repeat(100))).rejects.toMatchObject({ code: "message_too_large" });
    client.clearError();
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(urls).toHaveLength(2);
  });

  it("leaves a run alone: clearError during it only dismisses its error", async () => {
    const stream = channel();
    const { client, urls } = await givenUp({ transport: new MockTransport(() => stream.frames()) });
    const r = run(CTX_1, "run-1");
    const sent = client.send("Hello");
    stream.push(r.start());
    stream.push(r.error("store_error", "Could not save.", true));
    await vi.waitFor(() => expect(client.getSnapshot().error?.code).toBe("store_error"));
    client.clearError();
    expect(client.getSnapshot()).toMatchObject({ status: "streaming", error: null });
    stream.push(r.title("Weather"));
    stream.push(r.done("Hi"));
    await sent;
    expect(texts(client)).toEqual(["Hello", "Hi"]);
    expect(urls).toHaveLength(1);
  });
});
