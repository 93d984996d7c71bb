/**
 * What AgentClient puts on the wire beyond the message — `data`, `credentials`,
 * WebSocket tickets — and how its requests end: read to their end, never
 * aborted once complete.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import type { Transcript } from "./generated/wire.js";
import { channel, fakeFetch, fakeWebSocket, MockTransport, newLog, runFrames as run, type Script, transcriptTurn } from "./testing/index.js";
import { WebSocketTransport } from "./websocket-transport.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

interface Recorded {
  url: string;
  method: string;
  credentials: RequestCredentials | undefined;
  signal: AbortSignal;
  /** How far the response body was read: `none` without one, `failed` when it broke. */
  body: "none" | "open" | "read" | "cancelled" | "failed";
}

/** Wraps a fetch: records each request's signal and credentials, and whether its body was read to its end. */
function recording(fetchImpl: typeof fetch) {
  const requests: Recorded[] = [];
  const wrapped: typeof fetch = async (input, init) => {
    const entry: Recorded = {
      url: String(input),
      method: init?.method ?? "GET",
      credentials: init?.credentials,
      signal: init!.signal!,
      body: "open",
    };
    requests.push(entry);
    const response = await fetchImpl(input, init);
    if (!response.body) {
      entry.body = "none";
      return response;
    }
    const reader = response.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            entry.body = "read";
            controller.close();
          } else {
            controller.enqueue(value);
          }
        } catch (error) {
          entry.body = "failed";
          controller.error(error);
        }
      },
      cancel(reason) {
        entry.body = "cancelled";
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
  return { fetch: wrapped, requests };
}

const LAST_TURN = "turn-000000000000-a0";

/** A conversation of one exchange, named; a send onto it follows its last turn, `LAST_TURN`. */
function transcript(contextId: string, activeRunId: string | null = null): Transcript {
  return {
    contextId,
    agent: "demo",
    title: "Hello",
    turns: [
      transcriptTurn("user", "Hello", { id: "turn-000000000000-u0" }),
      transcriptTurn("assistant", "Hi", { id: LAST_TURN }),
    ],
    activeRunId,
    pendingInterrupt: null,
    hasEarlier: false,
  };
}

describe("AgentClient send data", () => {
  function echo() {
    let runs = 0;
    return new MockTransport(() => {
      const r = run("ctx-1", `run-${++runs}`, runs * 10);
      return [r.start(), r.done("ok")];
    });
  }

  it("sends a copy of the data, taken at send time, in the request body", async () => {
    const transport = echo();
    const client = new AgentClient({ agent: "demo", transport });
    const data = { page: "/orders/1234", selection: ["line-2"], nested: { at: 3 } };
    const sent = client.send("What is this?", { data });
    data.page = "/elsewhere";
    await sent;
    expect(transport.requests[0]!.body).toEqual({
      messageId: expect.any(String),
      message: { text: "What is this?" },
      data: { page: "/orders/1234", selection: ["line-2"], nested: { at: 3 } },
    });
    // No data, no field.
    await client.send("again");
    expect(transport.requests[1]!.body).not.toHaveProperty("data");
  });

  it("refuses data that is not a JSON object, without a request", async () => {
    const transport = echo();
    const client = new AgentClient({ agent: "demo", transport });
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    for (const data of [["a"], null, "text", 3, { big: 10n }, cyclic] as unknown[]) {
      await expect(client.send("hi", { data: data as Record<string, unknown> })).rejects.toMatchObject({
        code: "invalid_request",
      });
    }
    expect(transport.requests).toHaveLength(0);
    expect(client.getSnapshot().turns).toEqual([]);
  });
});

describe("AgentClient credentials", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("uses the credentials option for the transcript and every request of the transport it creates", async () => {
    const r = run(CTX_1, "run-1", 10);
    const script: Script = {
      run: () => ({ frames: [r.start({ afterTurnId: LAST_TURN }), r.done("ok")] }),
      transcript: (contextId) => transcript(contextId),
      stop: () => undefined,
    };
    const { fetch, requests } = recording(fakeFetch(script, newLog()));
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch, credentials: "include" });
    await client.start();
    await client.send("hi");
    expect(requests.map((request) => [request.method, request.url, request.credentials])).toEqual([
      ["GET", `/agents/demo/contexts/${CTX_1}?limit=50`, "include"],
      ["POST", "/agents/demo/runs", "include"],
    ]);
  });

  it("sends same-origin credentials by default", async () => {
    const script: Script = { run: () => ({ frames: [] }), transcript: (contextId) => transcript(contextId) };
    const { fetch, requests } = recording(fakeFetch(script, newLog()));
    await new AgentClient({ agent: "demo", contextId: CTX_1, fetch }).start();
    expect(requests[0]!.credentials).toBe("same-origin");
  });

  it('over transport: "websocket" with headers, opens the socket with a ticket fetched with the client\'s fetch, headers and credentials', async () => {
    const log = newLog();
    let runs = 0;
    const script: Script = {
      requireTicket: true,
      run: () => {
        const frames = run("ctx-1", `run-${++runs}`, runs * 10);
        return { frames: [frames.start(), frames.done(`reply ${runs}`)] };
      },
    };
    const { WebSocket, sockets } = fakeWebSocket(script, log);
    vi.stubGlobal("WebSocket", WebSocket);
    const { fetch, requests } = recording(fakeFetch(script, log));
    const client = new AgentClient({
      agent: "demo",
      baseUrl: "https://api.test",
      transport: "websocket",
      fetch,
      credentials: "include",
      headers: { Authorization: "Bearer t" },
      reconnect: { baseDelayMs: 1 },
    });
    expect((await client.send("one")).text).toBe("reply 1");
    expect(sockets[0]!.url).toBe("wss://api.test/agents/demo/ws?ticket=ticket-1");
    expect(requests.map((request) => [request.method, request.url, request.credentials])).toEqual([
      ["POST", "https://api.test/agents/demo/tickets", "include"],
      ["GET", "https://api.test/agents/demo/contexts/ctx-1?limit=50", "include"], // for the title the server gave it
    ]);
    expect(log.tickets[0]).toMatchObject({ authorization: "Bearer t", "thinwire-protocol": "1" });

    // The socket drops: the next send opens another, with a fresh ticket.
    sockets[0]!.drop(1006);
    expect((await client.send("two")).text).toBe("reply 2");
    expect(sockets.map((socket) => socket.url)).toEqual([
      "wss://api.test/agents/demo/ws?ticket=ticket-1",
      "wss://api.test/agents/demo/ws?ticket=ticket-2",
    ]);
    client.dispose();
  });

  it("shows a refused ticket request as the typed error of the send", async () => {
    const log = newLog();
    const script: Script = {
      run: () => ({ frames: [] }),
      ticket: () => ({ error: { status: 401, code: "unauthenticated", message: "Sign in." } }),
    };
    const { WebSocket, sockets } = fakeWebSocket(script, log);
    vi.stubGlobal("WebSocket", WebSocket);
    const client = new AgentClient({
      agent: "demo",
      baseUrl: "https://api.test",
      transport: "websocket",
      fetch: fakeFetch(script, log),
      headers: { Authorization: "Bearer expired" },
    });
    await expect(client.send("hi")).rejects.toMatchObject({ code: "unauthenticated", status: 401 });
    expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: "unauthenticated" } });
    expect(sockets).toHaveLength(0);
    expect(log.runs).toHaveLength(0);
    client.dispose();
  });
});

describe("AgentClient over a WebSocket refused at the handshake", () => {
  it("shows a retryable network_error that says the handshake failed, once the tries ran out", async () => {
    const log = newLog();
    const script: Script = { refuseHandshake: true, run: () => ({ frames: [] }) };
    const { WebSocket, sockets } = fakeWebSocket(script, log);
    const transport = new WebSocketTransport({ WebSocket, url: "wss://api.test/agents/demo/ws" });
    const statuses: string[] = [];
    const client = new AgentClient({ agent: "demo", transport, reconnect: { attempts: 2, baseDelayMs: 1 } });
    client.subscribe(() => statuses.push(client.getSnapshot().status));
    const error = await client.send("hi").catch((caught: unknown) => caught);
    expect(error).toMatchObject({ code: "network_error", retryable: true });
    expect((error as Error).message).toContain("handshake failed");
    expect(sockets).toHaveLength(3); // the first try and two more
    expect(log.runs).toHaveLength(0);
    expect(new Set(statuses)).toEqual(new Set(["streaming", "reconnecting", "error"]));
    expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: "network_error" } });
  });
});

describe("AgentClient requests end cleanly", () => {
  it("reads every response to its end and never aborts a request that completed", async () => {
    const r = run(CTX_1, "run-1", 10);
    const script: Script = {
      run: () => ({ frames: [r.start({ afterTurnId: LAST_TURN }), r.token("Hi"), r.done("Hi")] }),
      transcript: (contextId) => transcript(contextId),
    };
    const { fetch, requests } = recording(fakeFetch(script, newLog()));
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, fetch });
    await client.start();
    expect((await client.send("Hello")).text).toBe("Hi");
    await tick(); // the stream is read on after `done`, to its end
    client.reset();
    client.dispose();
    expect(requests.map((request) => [request.method, request.url, request.body, request.signal.aborted])).toEqual([
      ["GET", `/agents/demo/contexts/${CTX_1}?limit=50`, "read", false],
      ["POST", "/agents/demo/runs", "read", false],
    ]);
  });

  it("on reset, aborts the request in flight and leaves the ones that completed alone", async () => {
    const r = run("ctx-1", "run-1");
    const never = channel();
    const script: Script = {
      run: () => ({ frames: [r.start(), r.token("Hal")], cut: true }),
      attach: () => ({ frames: never.frames() }),
    };
    const { fetch, requests } = recording(fakeFetch(script, newLog()));
    const client = new AgentClient({ agent: "demo", fetch, reconnect: { baseDelayMs: 1 } });
    const sent = client.send("Hello");
    await vi.waitFor(() => expect(requests).toHaveLength(2)); // the POST broke; the attach waits
    client.reset();
    await expect(sent).rejects.toMatchObject({ code: "aborted" });
    expect(requests.map((request) => [request.method, request.url, request.signal.aborted])).toEqual([
      ["POST", "/agents/demo/runs", false],
      ["GET", "/agents/demo/contexts/ctx-1/events", true],
    ]);
    expect(requests[0]!.body).toBe("failed");
  });

  it("reads a stop's answer to its end", async () => {
    const stream = channel();
    const r = run("ctx-1", "run-1");
    const script: Script = {
      run: () => ({ frames: stream.frames() }),
      stop: () => {
        stream.push(r.done("Par", [], "stopped"));
        stream.end();
      },
    };
    const { fetch, requests } = recording(fakeFetch(script, newLog()));
    const client = new AgentClient({ agent: "demo", fetch });
    const sent = client.send("Long story");
    stream.push(r.start());
    stream.push(r.token("Par"));
    await vi.waitFor(() => expect(client.getSnapshot().contextId).toBe("ctx-1"));
    await client.stop();
    expect((await sent).stopReason).toBe("stopped");
    await tick();
    client.dispose();
    expect(requests.map((request) => [request.url, request.body, request.signal.aborted])).toEqual([
      ["/agents/demo/runs", "read", false],
      ["/agents/demo/contexts/ctx-1/stop", "read", false],
      ["/agents/demo/contexts/ctx-1?limit=50", "read", false], // for the title the server gave it
    ]);
  });
});
