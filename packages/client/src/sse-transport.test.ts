/** SseTransport over a fake fetch: requests, typed errors, broken streams, attach, stop, decide, regenerate and edit. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { ThinwireError } from "./errors.js";
import type { Frame, RunRequest } from "./generated/wire.js";
import { SseTransport } from "./sse-transport.js";

const encoder = new TextEncoder();

function eventStream(text: string, headers: Record<string, string> = {}): Response {
  const bytes = encoder.encode(text);
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      // Three uneven chunks, so frames straddle chunk boundaries.
      controller.enqueue(bytes.slice(0, 7));
      controller.enqueue(bytes.slice(7, 61));
      controller.enqueue(bytes.slice(61));
      controller.close();
    },
  });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream", ...headers } });
}

function sse(frames: object[]): string {
  return frames.map((frame, index) => `id: ${index + 1}\ndata: ${JSON.stringify(frame)}\n\n`).join(": ping\n\n");
}

const ids = { contextId: "ctx-1", runId: "run-1" };
const FRAMES: Frame[] = [
  { ...ids, seq: 1, type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false },
  { ...ids, seq: 2, type: "token", delta: "Grüße 👋" },
  { ...ids, seq: 3, type: "done", text: "Grüße 👋", toolCalls: [], stopReason: "end" },
];

function request(overrides: Partial<{ body: RunRequest; signal: AbortSignal }> = {}) {
  return {
    baseUrl: "",
    agent: "demo",
    body: { contextId: "ctx-1", message: { text: "hi" } },
    headers: { "Thinwire-Protocol": "1", authorization: "Bearer t" },
    signal: new AbortController().signal,
    ...overrides,
  };
}

async function collect(frames: AsyncIterable<Frame>): Promise<Frame[]> {
  const out: Frame[] = [];
  for await (const frame of frames) out.push(frame);
  return out;
}

async function failure(frames: AsyncIterable<Frame>): Promise<ThinwireError> {
  try {
    await collect(frames);
  } catch (error) {
    expect(error).toBeInstanceOf(ThinwireError);
    return error as ThinwireError;
  }
  throw new Error("expected the stream to fail");
}

describe("SseTransport", () => {
  it("POSTs the request with the protocol header and yields the frames", async () => {
    const fetch = vi.fn(async (..._args: Parameters<typeof globalThis.fetch>) => eventStream(sse(FRAMES)));
    const transport = new SseTransport({ fetch });
    const signal = new AbortController().signal;
    const body = { contextId: "ctx-1", messageId: "msg-0f3a9c", message: { text: "hi" } };
    expect(await collect(transport.run(request({ body, signal })))).toEqual(FRAMES);

    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe("/agents/demo/runs");
    expect(init?.method).toBe("POST");
    expect(init?.credentials).toBe("same-origin");
    // The request's own signal, which follows the caller's while the request is in flight.
    expect(init?.signal).toBeInstanceOf(AbortSignal);
    const headers = new Headers(init?.headers);
    expect(headers.get("Thinwire-Protocol")).toBe("1");
    expect(headers.get("authorization")).toBe("Bearer t");
    expect(headers.get("content-type")).toBe("application/json");
    expect(headers.get("accept")).toBe("text/event-stream");
    expect(JSON.parse(String(init?.body))).toEqual(body);
  });

  it("passes unknown frame types and fields through and fills a missing seq from the id", async () => {
    const text = 'id: 4\ndata: {"type":"mystery","contextId":"c","runId":"r","extra":1}\n\n';
    const transport = new SseTransport({ fetch: async () => eventStream(text) });
    expect(await collect(transport.run(request()))).toEqual([
      { type: "mystery", contextId: "c", runId: "r", extra: 1, seq: 4 },
    ]);
  });

  it("turns an error body into a typed ThinwireError", async () => {
    const fetch = async () =>
      new Response(JSON.stringify({ error: { code: "context_busy", message: "A run is active." } }), {
        status: 409,
        headers: { "content-type": "application/json" },
      });
    const error = await failure(new SseTransport({ fetch }).run(request()));
    expect(error).toMatchObject({ code: "context_busy", message: "A run is active.", status: 409, retryable: true });
  });

  it("takes retryable from the error body when it says, and judges by code and status when not", async () => {
    const answer = (status: number, error: object) => async () =>
      new Response(JSON.stringify({ error }), { status, headers: { "content-type": "application/json" } });
    const said = await failure(
      new SseTransport({ fetch: answer(503, { code: "store_unavailable", message: "Away.", retryable: false }) }).run(request()),
    );
    expect(said).toMatchObject({ code: "store_unavailable", status: 503, retryable: false });
    const saidSo = await failure(
      new SseTransport({ fetch: answer(400, { code: "something_new", message: "Later.", retryable: true }) }).run(request()),
    );
    expect(saidSo).toMatchObject({ code: "something_new", status: 400, retryable: true });
    const unsaid = await failure(
      new SseTransport({ fetch: answer(409, { code: "too_many_streams", message: "Too many." }) }).run(request()),
    );
    expect(unsaid).toMatchObject({ code: "too_many_streams", retryable: true });
  });

  it("keeps a generic error for a body that is not JSON, naming the request", async () => {
    const fetch = async () => new Response("<h1>Bad request</h1>", { status: 400, statusText: "Bad Request" });
    const error = await failure(new SseTransport({ fetch }).run(request()));
    expect(error).toMatchObject({ code: "http_error", status: 400, retryable: false });
    expect(error.message).toBe("HTTP 400 Bad Request for POST /agents/demo/runs.");
  });

  it("says baseUrl may be wrong when a 404 is not thinwire's", async () => {
    const fetch = async () => new Response("Cannot GET", { status: 404, statusText: "Not Found" });
    const transport = new SseTransport({ fetch });
    const error = await failure(transport.attach({ ...request(), baseUrl: "/nope", contextId: "ctx-1", after: 3 }));
    expect(error).toMatchObject({ code: "http_error", status: 404 });
    expect(error.message).toBe(
      "HTTP 404 Not Found for GET /nope/agents/demo/contexts/ctx-1/events: no thinwire server answers there; is baseUrl right?",
    );
    // thinwire's own 404 says what it is.
    const own = async () =>
      new Response(JSON.stringify({ error: { code: "context_not_found", message: "No such conversation." } }), {
        status: 404,
        headers: { "content-type": "application/json" },
      });
    const said = await failure(new SseTransport({ fetch: own }).attach({ ...request(), contextId: "ctx-1", after: 0 }));
    expect(said).toMatchObject({ code: "context_not_found", message: "No such conversation." });
  });

  it("reports a failed fetch as a retryable network error", async () => {
    const fetch = async (): Promise<Response> => {
      throw new TypeError("fetch failed");
    };
    const error = await failure(new SseTransport({ fetch }).run(request()));
    expect(error).toMatchObject({ code: "network_error", retryable: true });
  });

  it("reports an aborted request as aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    const fetch = async (_url: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
      throw init?.signal?.reason ?? new DOMException("Aborted", "AbortError");
    };
    const error = await failure(new SseTransport({ fetch }).run(request({ signal: controller.signal })));
    expect(error.code).toBe("aborted");
  });

  it("reports a stream that breaks mid-way as a network error", async () => {
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode(sse(FRAMES.slice(0, 1))));
      },
      async pull(controller) {
        await new Promise((resolve) => setTimeout(resolve, 5)); // the connection drops a little later
        controller.error(new TypeError("socket hang up"));
      },
    });
    const fetch = async () => new Response(body, { headers: { "content-type": "text/event-stream" } });
    const frames: Frame[] = [];
    const error = await failure(
      (async function* () {
        for await (const frame of new SseTransport({ fetch }).run(request())) {
          frames.push(frame);
          yield frame;
        }
      })(),
    );
    expect(frames).toEqual(FRAMES.slice(0, 1));
    expect(error).toMatchObject({ code: "network_error", retryable: true });
  });

  it("refuses another protocol version and a response that is not an event stream", async () => {
    const mismatch = await failure(
      new SseTransport({ fetch: async () => eventStream(sse(FRAMES), { "Thinwire-Protocol": "2" }) }).run(request()),
    );
    expect(mismatch.code).toBe("protocol_mismatch");
    const html = await failure(
      new SseTransport({
        fetch: async () => new Response("<html></html>", { headers: { "content-type": "text/html" } }),
      }).run(request()),
    );
    expect(html.code).toBe("protocol_error");
  });

  it("rejects an event whose data is not a JSON frame", async () => {
    const error = await failure(new SseTransport({ fetch: async () => eventStream("data: {oops\n\n") }).run(request()));
    expect(error.code).toBe("protocol_error");
  });
});

describe("SseTransport attach and stop", () => {
  const target = { baseUrl: "https://api.test/tw", agent: "demo", headers: { "Thinwire-Protocol": "1" } };

  it("GETs the context's events after the last seq", async () => {
    const fetch = vi.fn(async (..._args: Parameters<typeof globalThis.fetch>) => eventStream(sse(FRAMES)));
    const frames = await collect(
      new SseTransport({ fetch }).attach({ ...target, contextId: "ctx 1", after: 7, signal: new AbortController().signal }),
    );
    expect(frames).toEqual(FRAMES);
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe("https://api.test/tw/agents/demo/contexts/ctx%201/events");
    expect(init?.method).toBe("GET");
    const headers = new Headers(init?.headers);
    expect(headers.get("Last-Event-ID")).toBe("7");
    expect(headers.get("accept")).toBe("text/event-stream");
    expect(headers.get("Thinwire-Protocol")).toBe("1");
  });

  it("ends without frames on 204 and throws the typed error otherwise", async () => {
    const empty = new SseTransport({ fetch: async () => new Response(null, { status: 204 }) });
    expect(
      await collect(empty.attach({ ...target, contextId: "ctx-1", after: 3, signal: new AbortController().signal })),
    ).toEqual([]);
    const missing = new SseTransport({
      fetch: async () =>
        new Response(JSON.stringify({ error: { code: "context_not_found", message: "No." } }), { status: 404 }),
    });
    const error = await failure(
      missing.attach({ ...target, contextId: "ctx-1", after: 3, signal: new AbortController().signal }),
    );
    expect(error).toMatchObject({ code: "context_not_found", status: 404 });
  });

  it("POSTs a stop and surfaces a refusal", async () => {
    const fetch = vi.fn(
      async (..._args: Parameters<typeof globalThis.fetch>) =>
        new Response(JSON.stringify({ contextId: "ctx-1", runId: "run-1", stopping: true }), { status: 200 }),
    );
    expect(await new SseTransport({ fetch }).stop({ ...target, contextId: "ctx-1" })).toEqual({
      contextId: "ctx-1",
      runId: "run-1",
      stopping: true,
    });
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe("https://api.test/tw/agents/demo/contexts/ctx-1/stop");
    expect(init?.method).toBe("POST");
    expect(new Headers(init?.headers).get("Thinwire-Protocol")).toBe("1");

    const refused = new SseTransport({
      fetch: async () =>
        new Response(JSON.stringify({ error: { code: "unauthenticated", message: "Sign in." } }), { status: 401 }),
    });
    await expect(refused.stop({ ...target, contextId: "ctx-1" })).rejects.toMatchObject({ code: "unauthenticated" });
  });

  it("POSTs a decision and yields the continued run; a refusal names its interrupt", async () => {
    const fetch = vi.fn(async (..._args: Parameters<typeof globalThis.fetch>) => eventStream(sse(FRAMES)));
    const signal = new AbortController().signal;
    const frames = new SseTransport({ fetch }).decide({
      ...target,
      contextId: "ctx 1",
      interruptId: "int-1",
      value: { amount: 40 },
      signal,
    });
    expect(await collect(frames)).toEqual(FRAMES);
    const [url, init] = fetch.mock.calls[0]!;
    expect(url).toBe("https://api.test/tw/agents/demo/contexts/ctx%201/decisions");
    expect(init?.method).toBe("POST");
    expect(init?.signal).toBeInstanceOf(AbortSignal);
    const headers = new Headers(init?.headers);
    expect(headers.get("Thinwire-Protocol")).toBe("1");
    expect(headers.get("content-type")).toBe("application/json");
    expect(headers.get("accept")).toBe("text/event-stream");
    expect(JSON.parse(String(init?.body))).toEqual({ interruptId: "int-1", value: { amount: 40 } });

    const refused = new SseTransport({
      fetch: async () =>
        new Response(
          JSON.stringify({ error: { code: "decision_pending", message: "Decide first.", interruptId: "int-7" } }),
          { status: 409 },
        ),
    });
    const error = await failure(refused.run(request()));
    expect(error).toMatchObject({ code: "decision_pending", status: 409, interruptId: "int-7", retryable: false });
  });
});

describe("SseTransport on a quiet stream", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * A stream the test writes into, with `headers`; it never ends by itself.
   * Its request's abort fails its read, as fetch's does.
   */
  function openStream(headers: Record<string, string> = {}) {
    let write: (text: string) => void = () => undefined;
    let aborted = false;
    const fetch = vi.fn(async (_url: RequestInfo | URL, init?: RequestInit) => {
      const body = new ReadableStream<Uint8Array>({
        start(controller) {
          write = (text) => controller.enqueue(encoder.encode(text));
          init?.signal?.addEventListener("abort", () => {
            aborted = true;
            controller.error(new DOMException("Aborted.", "AbortError"));
          });
        },
      });
      return new Response(body, { status: 200, headers: { "content-type": "text/event-stream", ...headers } });
    });
    const outcome: { frames: Frame[]; error: ThinwireError | null } = { frames: [], error: null };
    const reading = (async () => {
      try {
        for await (const frame of new SseTransport({ fetch }).run(request())) outcome.frames.push(frame);
      } catch (error) {
        outcome.error = error as ThinwireError;
      }
    })();
    return { write: (text: string) => write(text), outcome, reading, aborted: () => aborted };
  }

  it("cancels a stream silent past twice the interval the server announces, as a dropped connection", async () => {
    vi.useFakeTimers();
    const stream = openStream({ "Thinwire-Heartbeat": "10" });
    await vi.advanceTimersByTimeAsync(0);
    stream.write(sse(FRAMES.slice(0, 1)));
    await vi.advanceTimersByTimeAsync(19_999);
    expect(stream.outcome).toEqual({ frames: FRAMES.slice(0, 1), error: null });
    await vi.advanceTimersByTimeAsync(1);
    await stream.reading;
    expect(stream.aborted()).toBe(true);
    expect(stream.outcome.error).toMatchObject({ code: "network_error", retryable: true });
    expect(stream.outcome.error?.message).toBe(
      "Nothing came through the stream for 20 s, not even a heartbeat: the connection is taken as broken.",
    );
  });

  it("counts a heartbeat as a sign of life, and waits two of the default interval for a server that names none", async () => {
    vi.useFakeTimers();
    const stream = openStream();
    for (let beat = 0; beat < 8; beat++) {
      await vi.advanceTimersByTimeAsync(15_000);
      stream.write(": heartbeat\n\n");
    }
    await vi.advanceTimersByTimeAsync(29_999);
    expect(stream.outcome.error).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    await stream.reading;
    expect(stream.outcome.error).toMatchObject({ code: "network_error" });
  });

  it("keeps no watch on a server that sends no heartbeats", async () => {
    vi.useFakeTimers();
    const stream = openStream({ "Thinwire-Heartbeat": "0" });
    await vi.advanceTimersByTimeAsync(600_000);
    expect(stream.aborted()).toBe(false);
    stream.write(sse(FRAMES));
    await vi.advanceTimersByTimeAsync(0);
    expect(stream.outcome.frames).toEqual(FRAMES);
    expect(vi.getTimerCount()).toBe(0);
  });
});

/** A response whose body tells whether it was read to its end or cancelled. */
function trackedResponse(text: string, contentType: string, hold = false) {
  let state: "open" | "read" | "cancelled" = "open";
  let release: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (release = resolve));
  let sent = false;
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(encoder.encode(text));
        return;
      }
      if (hold) await held;
      state = "read";
      controller.close();
    },
    cancel() {
      state = "cancelled";
    },
  });
  const response = new Response(body, { status: 200, headers: { "content-type": contentType } });
  return { response, state: () => state, release };
}

describe("SseTransport requests end cleanly", () => {
  it("reads an event stream through a clone of the response, whose other branch it cancels", async () => {
    // Chromium lists a no-store stream read with body.getReader() as cancelled (net::ERR_ABORTED),
    // however completely it was read; the branch of a tee finishes cleanly.
    const tracked = trackedResponse(sse(FRAMES), "text/event-stream");
    const clone = vi.spyOn(tracked.response, "clone");
    const transport = new SseTransport({ fetch: async () => tracked.response });
    expect(await collect(transport.run(request()))).toEqual(FRAMES);
    expect(clone).toHaveBeenCalledTimes(1);
    expect(tracked.state()).toBe("read");

    // Leaving the stream early still cancels the request: both branches are then cancelled.
    const early = trackedResponse(sse(FRAMES), "text/event-stream", true);
    const frames = new SseTransport({ fetch: async () => early.response }).run(request())[Symbol.asyncIterator]();
    await frames.next();
    await frames.return(undefined);
    expect(early.state()).toBe("cancelled");
  });

  const target = { baseUrl: "", agent: "demo", headers: { "Thinwire-Protocol": "1" } };

  it("sends the credentials option with every request, same-origin by default", async () => {
    const calls: RequestInit[] = [];
    const fetch = async (_url: RequestInfo | URL, init?: RequestInit) => {
      calls.push(init!);
      if (init?.method === "POST" && String(_url).endsWith("/stop")) {
        return new Response(JSON.stringify({ stopping: true }), { status: 200 });
      }
      return eventStream(sse(FRAMES));
    };
    const transport = new SseTransport({ fetch, credentials: "include" });
    const signal = new AbortController().signal;
    await collect(transport.run(request()));
    await collect(transport.attach({ ...target, contextId: "ctx-1", after: 1, signal }));
    await collect(transport.decide({ ...target, contextId: "ctx-1", interruptId: "int-1", value: "ok", signal }));
    await transport.stop({ ...target, contextId: "ctx-1" });
    expect(calls.map((init) => init.credentials)).toEqual(["include", "include", "include", "include"]);

    calls.length = 0;
    await collect(new SseTransport({ fetch }).run(request()));
    expect(calls[0]!.credentials).toBe("same-origin");
  });

  it("lets go of the caller's signal once a stream was read to its end: a later abort leaves it alone", async () => {
    const signals: AbortSignal[] = [];
    const tracked = trackedResponse(sse(FRAMES), "text/event-stream");
    const fetch = async (_url: RequestInfo | URL, init?: RequestInit) => {
      signals.push(init!.signal!);
      return tracked.response;
    };
    const job = new AbortController();
    expect(await collect(new SseTransport({ fetch }).run(request({ signal: job.signal })))).toEqual(FRAMES);
    expect(tracked.state()).toBe("read");
    job.abort();
    expect(signals[0]!.aborted).toBe(false);
  });

  it("aborts a request in flight when the caller's signal fires", async () => {
    const signals: AbortSignal[] = [];
    const tracked = trackedResponse(sse(FRAMES.slice(0, 2)), "text/event-stream", true);
    const fetch = async (_url: RequestInfo | URL, init?: RequestInit) => {
      signals.push(init!.signal!);
      return tracked.response;
    };
    const job = new AbortController();
    const frames = new SseTransport({ fetch }).run(request({ signal: job.signal }))[Symbol.asyncIterator]();
    expect((await frames.next()).value).toEqual(FRAMES[0]);
    job.abort();
    expect(signals[0]!.aborted).toBe(true);
    await frames.return(undefined);
    expect(tracked.state()).toBe("cancelled");
  });

  it("reads a stop's answer to its end instead of cancelling it", async () => {
    const tracked = trackedResponse(JSON.stringify({ contextId: "ctx-1", runId: "run-1", stopping: true }), "application/json");
    let signal: AbortSignal | undefined;
    const controller = new AbortController();
    const transport = new SseTransport({
      fetch: async (_url, init) => {
        signal = init?.signal ?? undefined;
        return tracked.response;
      },
    });
    await transport.stop({ ...target, contextId: "ctx-1", signal: controller.signal });
    expect(tracked.state()).toBe("read");
    controller.abort();
    expect(signal?.aborted).toBe(false);
  });
});

describe("SseTransport branches", () => {
  it("POSTs a regeneration and an edit to their routes, and yields the new run's frames", async () => {
    const fetch = vi.fn(async (..._args: Parameters<typeof globalThis.fetch>) => eventStream(sse(FRAMES)));
    const transport = new SseTransport({ fetch, credentials: "include" });
    const base = { baseUrl: "https://api.test/tw", agent: "demo bot", headers: { "Thinwire-Protocol": "1" } };
    const signal = new AbortController().signal;
    expect(await collect(transport.regenerate({ ...base, contextId: "ctx-1", body: { messageId: "msg-regen-1" }, signal }))).toEqual(
      FRAMES,
    );
    const edit = { turnId: "turn-u1", message: { text: "Instead" }, messageId: "msg-edit-1", data: { page: "/x" } };
    expect(await collect(transport.edit({ ...base, contextId: "ctx 1", body: edit, signal }))).toEqual(FRAMES);
    const calls = fetch.mock.calls.map(([url, init]) => [
      url,
      init?.method,
      init?.credentials,
      new Headers(init?.headers).get("accept"),
      JSON.parse(String(init?.body)),
    ]);
    expect(calls).toEqual([
      ["https://api.test/tw/agents/demo%20bot/contexts/ctx-1/regenerate", "POST", "include", "text/event-stream", { messageId: "msg-regen-1" }],
      ["https://api.test/tw/agents/demo%20bot/contexts/ctx%201/edits", "POST", "include", "text/event-stream", edit],
    ]);
  });

  it("throws the server's refusal of a regeneration as its typed error", async () => {
    const refusal = { error: { code: "nothing_to_regenerate", message: "No reply.", retryable: false } };
    const fetch = async () => new Response(JSON.stringify(refusal), { status: 409, headers: { "content-type": "application/json" } });
    const error = await failure(
      new SseTransport({ fetch }).regenerate({ ...request(), contextId: "ctx-1", body: {} }),
    );
    expect(error).toMatchObject({ code: "nothing_to_regenerate", status: 409, retryable: false });
  });
});
