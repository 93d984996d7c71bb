/** WebSocketTransport over a fake socket: commands with requestIds, routing by requestId, close codes, aborts; AgentClient across a server restart. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { ThinwireError } from "./errors.js";
import { CLOSE_CODES, type Frame, RETRYABLE_CODES } from "./generated/wire.js";
import { channel, fakeFetch, fakeWebSocket, newLog, runFrames, type Script } from "./testing/index.js";
import { AgentClient } from "./agent-client.js";
import { WebSocketTransport, webSocketUrl } from "./websocket-transport.js";

const target = { baseUrl: "https://chat.test/tw", agent: "demo bot", headers: { "Thinwire-Protocol": "1" } };

function setup(script: Script) {
  const log = newLog();
  const { WebSocket, sockets } = fakeWebSocket(script, log);
  return { transport: new WebSocketTransport({ WebSocket }), sockets, log };
}

function signal(): AbortSignal {
  return new AbortController().signal;
}

const pause = (ms = 5) => new Promise((resolve) => setTimeout(resolve, ms));

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

describe("WebSocketTransport", () => {
  it("opens one socket with the subprotocol and sends commands as JSON", async () => {
    const r = runFrames("ctx-1", "run-1");
    const frames = [r.start(), r.token("Hi"), r.done("Hi")];
    const { transport, sockets } = setup({
      run: () => ({ frames }),
      attach: () => ({ frames: frames.slice(1) }),
    });
    const body = { contextId: "ctx-1", messageId: "msg-0f3a9c", message: { text: "hello" } };
    const ran = await collect(transport.run({ ...target, body, signal: signal() }));
    // The server echoes the send's requestId in the run_start of its run.
    expect(ran).toEqual([{ ...frames[0]!, requestId: sockets[0]!.sent[0]!.requestId }, ...frames.slice(1)]);
    expect(await collect(transport.attach({ ...target, contextId: "ctx-1", after: 1, signal: signal() }))).toEqual(
      frames.slice(1),
    );
    await transport.stop({ ...target, contextId: "ctx-1" });
    expect(sockets).toHaveLength(1);
    expect(sockets[0]!.url).toBe("wss://chat.test/tw/agents/demo%20bot/ws");
    expect(sockets[0]!.protocols).toEqual(["thinwire.v1.lines", "thinwire.v1"]);
    const requestId = expect.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/);
    expect(sockets[0]!.sent).toEqual([
      { type: "send", contextId: "ctx-1", messageId: "msg-0f3a9c", message: { text: "hello" }, requestId },
      { type: "attach", contextId: "ctx-1", after: 1, requestId },
      { type: "stop", contextId: "ctx-1", requestId },
    ]);
    // Unique per socket.
    expect(new Set(sockets[0]!.sent.map((command) => command.requestId)).size).toBe(3);
  });

  it("reads a message of several frames, one per line (thinwire.v1.lines)", async () => {
    const r = runFrames("ctx-1", "run-1");
    const { transport, sockets } = setup({ run: () => ({ frames: [] }) });
    const body = { contextId: "ctx-1", message: { text: "hello" } };
    const ran = collect(transport.run({ ...target, body, signal: signal() }));
    await pause();
    const frames = [{ ...r.start(), requestId: sockets[0]!.sent[0]!.requestId }, r.token("A"), r.token("B"), r.done("AB")];
    sockets[0]!.receive(frames.map((frame) => JSON.stringify(frame)).join("\n"));
    expect(await ran).toEqual(frames);
  });

  it("routes the frames of two contexts sharing the socket", async () => {
    const a = runFrames("ctx-a", "run-a");
    const b = runFrames("ctx-b", "run-b", 40);
    const { transport, sockets } = setup({
      run: (body) =>
        body.contextId === "ctx-a"
          ? { frames: [a.start(), a.token("A1"), a.token("A2"), a.done("A1A2")] }
          : { frames: [b.start(), b.token("B1"), b.token("B2"), b.done("B1B2")] },
    });
    const [first, second] = await Promise.all([
      collect(transport.run({ ...target, body: { contextId: "ctx-a", message: { text: "a" } }, signal: signal() })),
      collect(transport.run({ ...target, body: { contextId: "ctx-b", message: { text: "b" } }, signal: signal() })),
    ]);
    expect(sockets).toHaveLength(1);
    expect(first.map((frame) => frame.type === "token" && frame.delta).filter(Boolean)).toEqual(["A1", "A2"]);
    expect(second.map((frame) => frame.type === "token" && frame.delta).filter(Boolean)).toEqual(["B1", "B2"]);
    expect(first.every((frame) => frame.type !== "rejected" && frame.contextId === "ctx-a")).toBe(true);
  });

  it("gives two new-conversation sends in flight at once each its own run, by requestId", async () => {
    const streams = [channel(), channel()];
    let count = 0;
    const { transport, sockets } = setup({ run: () => ({ frames: streams[count++]!.frames() }) });
    const one = collect(transport.run({ ...target, body: { message: { text: "one" } }, signal: signal() }));
    const two = collect(transport.run({ ...target, body: { message: { text: "two" } }, signal: signal() }));
    await pause();
    // Both go out at once: nothing waits for the first to learn its context.
    const sent = sockets[0]!.sent;
    expect(sent.map((command) => command.type === "send" && command.message.text)).toEqual(["one", "two"]);
    expect(sent[0]!.requestId).not.toBe(sent[1]!.requestId);
    // The runs start in the opposite order of the sends, and their frames interleave.
    const r1 = runFrames("ctx-new-1", "run-1");
    const r2 = runFrames("ctx-new-2", "run-2");
    streams[1]!.push(r2.start());
    await pause();
    streams[0]!.push(r1.start());
    streams[1]!.push(r2.token("Two"));
    streams[0]!.push(r1.token("One"));
    streams[1]!.push(r2.done("Two"));
    await pause();
    streams[0]!.push(r1.done("One"));
    const texts = (frames: Frame[]) => frames.map((frame) => (frame.type === "rejected" ? "" : `${frame.contextId}:${frame.type}`));
    expect(texts(await two)).toEqual(["ctx-new-2:run_start", "ctx-new-2:token", "ctx-new-2:done"]);
    expect(texts(await one)).toEqual(["ctx-new-1:run_start", "ctx-new-1:token", "ctx-new-1:done"]);
    expect((await one)[0]).toMatchObject({ type: "run_start", requestId: sent[0]!.requestId });
  });

  it("fails exactly the command a rejection names, of two in flight on the same context", async () => {
    const stream = channel();
    let sends = 0;
    const { transport, sockets } = setup({
      run: () =>
        ++sends === 1
          ? { frames: stream.frames() }
          : { error: { status: 409, code: "context_busy", message: "A run is active." } },
    });
    const request = (text: string) =>
      transport.run({ ...target, body: { contextId: "ctx-1", message: { text } }, signal: signal() });
    const first = collect(request("first"));
    const second = failure(request("second"));
    // The refusal of the second arrives while both wait for their run: same kind, same context.
    expect(await second).toMatchObject({ code: "context_busy", message: "A run is active.", retryable: true });
    const r = runFrames("ctx-1", "run-1");
    stream.push(r.start());
    stream.push(r.token("ok"));
    stream.push(r.done("ok"));
    expect((await first).map((frame) => frame.type)).toEqual(["run_start", "token", "done"]);
    expect(sockets[0]!.sent.map((command) => command.type === "send" && command.message.text)).toEqual([
      "first",
      "second",
    ]);
  });

  it("ignores a rejection naming no command it is waiting for", async () => {
    const stream = channel();
    const { transport, sockets } = setup({ run: () => ({ frames: stream.frames() }) });
    const reading = collect(
      transport.run({ ...target, body: { contextId: "ctx-1", message: { text: "hi" } }, signal: signal() }),
    );
    await pause();
    const stranger = { type: "rejected", code: "context_busy", message: "Busy.", retryable: true, command: "send" };
    sockets[0]!.receive(JSON.stringify({ ...stranger, contextId: "ctx-1", requestId: null, interruptId: null }));
    sockets[0]!.receive(JSON.stringify({ ...stranger, contextId: "ctx-1", requestId: "someone-else", interruptId: null }));
    const r = runFrames("ctx-1", "run-1");
    stream.push(r.start());
    stream.push(r.done("hi"));
    expect((await reading).map((frame) => frame.type)).toEqual(["run_start", "done"]);
  });

  it("does not take a run_start that names no command of its own as a new conversation's", async () => {
    const old = runFrames("ctx-old", "run-1");
    const stream = channel();
    const { transport, sockets } = setup({
      run: (body) => (body.contextId ? { frames: [old.start(), old.done("old")] } : { frames: stream.frames() }),
    });
    await collect(transport.run({ ...target, body: { contextId: "ctx-old", message: { text: "a" } }, signal: signal() }));
    const fresh = collect(transport.run({ ...target, body: { message: { text: "b" } }, signal: signal() }));
    await new Promise((resolve) => setTimeout(resolve, 5));
    // Another tab starts a run in ctx-old; the server still sends it to this socket, naming no request of ours.
    const other = runFrames("ctx-old", "run-2", 10);
    sockets[0]!.receive(JSON.stringify(other.start()));
    const mine = runFrames("ctx-new", "run-3");
    stream.push(mine.start());
    stream.push(mine.done("new"));
    expect((await fresh).map((frame) => frame.type !== "rejected" && frame.contextId)).toEqual(["ctx-new", "ctx-new"]);
  });

  it("throws a rejected command as its typed error; an attach with nothing to follow just ends", async () => {
    const { transport } = setup({
      run: () => ({ error: { status: 404, code: "context_not_found", message: "Unknown context." } }),
      attach: () => ({ nothing: true }),
    });
    const error = await failure(
      transport.run({ ...target, body: { contextId: "ctx-x", message: { text: "hi" } }, signal: signal() }),
    );
    expect(error).toMatchObject({ code: "context_not_found", message: "Unknown context.", retryable: false });
    expect(await collect(transport.attach({ ...target, contextId: "ctx-x", after: 3, signal: signal() }))).toEqual([]);
  });

  it("reports a socket closed mid-stream as a retryable network error and reopens on next use", async () => {
    const r = runFrames("ctx-1", "run-1");
    const { transport, sockets } = setup({
      run: () => ({ frames: [r.start(), r.token("Hal")], cut: true }),
      attach: () => ({ frames: [r.done("Half")] }),
    });
    const seen: Frame[] = [];
    const error = await failure(
      (async function* () {
        for await (const frame of transport.run({ ...target, body: { contextId: "ctx-1", message: { text: "hi" } }, signal: signal() })) {
          seen.push(frame);
          yield frame;
        }
      })(),
    );
    expect(seen).toHaveLength(2);
    expect(error).toMatchObject({ code: "network_error", retryable: true });
    const rest = await collect(transport.attach({ ...target, contextId: "ctx-1", after: 2, signal: signal() }));
    expect(rest.map((frame) => frame.type)).toEqual(["done"]);
    expect(sockets).toHaveLength(2);
  });

  it("maps close codes: 4401 is unauthenticated, 1002 a protocol mismatch", async () => {
    const stream = channel();
    const { transport, sockets } = setup({ run: () => ({ frames: stream.frames() }) });
    const request = () => transport.run({ ...target, body: { contextId: "ctx-1", message: { text: "hi" } }, signal: signal() });
    const unauthenticated = failure(request());
    await new Promise((resolve) => setTimeout(resolve, 5));
    sockets[0]!.drop(4401, "sign in");
    expect(await unauthenticated).toMatchObject({ code: "unauthenticated", retryable: false });
    const mismatch = failure(request());
    await new Promise((resolve) => setTimeout(resolve, 5));
    sockets[1]!.drop(1002);
    expect((await mismatch).code).toBe("protocol_mismatch");
  });

  it("maps every close code of the protocol to its error, and any other to a retryable network error", async () => {
    const stream = channel();
    const { transport, sockets } = setup({ run: () => ({ frames: stream.frames() }) });
    const cases: Array<[number, string]> = [...Object.entries(CLOSE_CODES).map(([close, code]): [number, string] => [Number(close), code]), [1006, "network_error"], [1001, "network_error"]];
    for (const [index, [close, code]] of cases.entries()) {
      const failed = failure(transport.run({ ...target, body: { contextId: "ctx-1", message: { text: "hi" } }, signal: signal() }));
      await pause(2);
      sockets[index]!.drop(close, "why");
      const error = await failed;
      expect([close, error.code, error.retryable]).toEqual([close, code, RETRYABLE_CODES.has(code)]);
      expect(error.message).toContain(String(close));
    }
    expect(RETRYABLE_CODES.has("network_error")).toBe(true);
  });

  it("takes a socket whose keepalive ping went unanswered (1011 from the WebSocket layer) for a dropped one, any other 1011 for the server's failure", async () => {
    const stream = channel();
    const { transport, sockets } = setup({ run: () => ({ frames: stream.frames() }) });
    const outcomes: Array<[string, boolean]> = [];
    for (const [index, reason] of ["keepalive ping timeout", "Server error. Reference: err-1."].entries()) {
      const failed = failure(transport.run({ ...target, body: { contextId: "ctx-1", message: { text: "hi" } }, signal: signal() }));
      await pause(2);
      sockets[index]!.drop(1011, reason);
      const error = await failed;
      outcomes.push([error.code, error.retryable]);
    }
    expect(outcomes).toEqual([
      ["network_error", true],
      ["internal_error", false],
    ]);
  });

  it("says a socket refused with 4429 counts against the user's streams, and what frees them", async () => {
    const { transport, sockets } = setup({ run: () => ({ frames: [] }) });
    const failed = failure(transport.run({ ...target, body: { message: { text: "hi" } }, signal: signal() }));
    await pause(2);
    // As the server refuses it: a rejected frame no request asked for, then the close.
    sockets[0]!.receive(JSON.stringify({ type: "rejected", code: "too_many_streams", message: "at most 32 streams (SSE responses, WebSockets and the runs they follow) may be open at once for this user: close clients you no longer use" }));
    sockets[0]!.drop(4429);
    const error = await failed;
    expect(error).toMatchObject({ code: "too_many_streams", retryable: true });
    expect(error.message).toBe(
      "Too many streams open at once for this user (WebSocket closed with 4429): close clients you no longer use — " +
        "dispose() closes the socket of a client made with transport: \"websocket\"; a WebSocketTransport you pass in is yours to close.",
    );
  });

  it("stops yielding when the request is aborted, and ignores garbage messages", async () => {
    const stream = channel();
    const { transport, sockets } = setup({ run: () => ({ frames: stream.frames() }) });
    const controller = new AbortController();
    const r = runFrames("ctx-1", "run-1");
    const seen: Frame[] = [];
    const reading = (async () => {
      for await (const frame of transport.run({ ...target, body: { contextId: "ctx-1", message: { text: "hi" } }, signal: controller.signal })) {
        seen.push(frame);
      }
    })();
    stream.push(r.start());
    await vi.waitFor(() => expect(seen).toHaveLength(1)); // run_start read: the run is known
    sockets[0]!.receive("not json");
    sockets[0]!.receive('{"type":"token","delta":"no context"}');
    controller.abort();
    await expect(reading).rejects.toMatchObject({ code: "aborted" });
    expect(seen.map((frame) => frame.type)).toEqual(["run_start"]);
  });

  it("builds the socket URL from http, https and relative bases", () => {
    expect(webSocketUrl("http://localhost:8000/agents/demo/ws")).toBe("ws://localhost:8000/agents/demo/ws");
    expect(webSocketUrl("https://x.test/api/agents/demo/ws")).toBe("wss://x.test/api/agents/demo/ws");
    expect(() => webSocketUrl("/agents/demo/ws")).toThrow(ThinwireError); // no page location in node
  });

  it("sends a decide command and follows the new run of that known context", async () => {
    const first = runFrames("ctx-1", "run-1");
    const next = runFrames("ctx-1", "run-2", 10);
    const stream = channel();
    const { transport, sockets } = setup({
      run: () => ({ frames: [first.start(), first.done("Asking.", [], "interrupted")] }),
      decide: () => ({ frames: stream.frames() }),
    });
    await collect(transport.run({ ...target, body: { contextId: "ctx-1", message: { text: "hi" } }, signal: signal() }));
    const decided = collect(
      transport.decide({ ...target, contextId: "ctx-1", interruptId: "int-1", value: "approve", signal: signal() }),
    );
    await new Promise((resolve) => setTimeout(resolve, 5));
    // A late frame of the old run is not the continued run's.
    sockets[0]!.receive(JSON.stringify(first.token("late")));
    const frames = [next.start(), next.token("Done."), next.done("Done.")];
    for (const frame of frames) stream.push(frame);
    stream.end();
    expect(await decided).toEqual([{ ...frames[0]!, requestId: sockets[0]!.sent[1]!.requestId }, ...frames.slice(1)]);
    expect(sockets[0]!.sent[1]).toEqual({
      type: "decide",
      contextId: "ctx-1",
      interruptId: "int-1",
      value: "approve",
      requestId: expect.any(String),
    });
  });

  it("throws a rejected decision as its typed error", async () => {
    const { transport } = setup({
      run: () => ({ frames: [] }),
      decide: () => ({ error: { status: 400, code: "invalid_decision", message: "Choose one." } }),
    });
    const error = await failure(
      transport.decide({ ...target, contextId: "ctx-1", interruptId: "int-1", value: "maybe", signal: signal() }),
    );
    expect(error).toMatchObject({ code: "invalid_decision", message: "Choose one.", retryable: false });
  });
});

describe("WebSocketTransport branches", () => {
  it("sends regenerate and edit commands, each answered by the run_start that names it", async () => {
    const regenerated = runFrames("ctx-1", "run-2", 10);
    const edited = runFrames("ctx-1", "run-3", 20);
    const { transport, sockets, log } = setup({
      run: () => ({ frames: [] }),
      regenerate: () => ({ frames: [regenerated.start({ turnId: "turn-a4", userTurnId: "turn-u3" }), regenerated.done("Again.")] }),
      edit: () => ({ frames: [edited.start({ turnId: "turn-a6", userTurnId: "turn-u5" }), edited.done("Edited.")] }),
    });
    const [again, changed] = await Promise.all([
      collect(transport.regenerate({ ...target, contextId: "ctx-1", body: { messageId: "msg-regen-1" }, signal: signal() })),
      collect(
        transport.edit({
          ...target,
          contextId: "ctx-1",
          body: { turnId: "turn-u1", message: { text: "Instead" }, messageId: "msg-edit-1", data: { page: "/x" } },
          signal: signal(),
        }),
      ),
    ]);
    const [regenerate, edit] = sockets[0]!.sent;
    expect(again.map((frame) => frame.type)).toEqual(["run_start", "done"]);
    expect(again[0]).toMatchObject({ turnId: "turn-a4", userTurnId: "turn-u3", requestId: regenerate!.requestId });
    expect(changed[0]).toMatchObject({ turnId: "turn-a6", userTurnId: "turn-u5", requestId: edit!.requestId });
    expect(sockets[0]!.sent).toEqual([
      { type: "regenerate", contextId: "ctx-1", messageId: "msg-regen-1", requestId: expect.any(String) },
      {
        type: "edit",
        contextId: "ctx-1",
        turnId: "turn-u1",
        message: { text: "Instead" },
        messageId: "msg-edit-1",
        data: { page: "/x" },
        requestId: expect.any(String),
      },
    ]);
    expect(log.regenerations).toEqual([{ contextId: "ctx-1", messageId: "msg-regen-1" }]);
  });

  it("throws a rejected regenerate or edit as its typed error", async () => {
    const { transport } = setup({
      run: () => ({ frames: [] }),
      regenerate: () => ({ error: { status: 409, code: "nothing_to_regenerate", message: "No reply." } }),
      edit: () => ({ error: { status: 400, code: "not_a_user_turn", message: "A reply." } }),
    });
    const regenerate = await failure(transport.regenerate({ ...target, contextId: "ctx-1", body: {}, signal: signal() }));
    expect(regenerate).toMatchObject({ code: "nothing_to_regenerate", retryable: false });
    const edit = await failure(
      transport.edit({ ...target, contextId: "ctx-1", body: { turnId: "turn-a2", message: { text: "x" } }, signal: signal() }),
    );
    expect(edit).toMatchObject({ code: "not_a_user_turn", retryable: false });
  });
});

describe("WebSocketTransport tickets", () => {
  const bearer = { ...target, headers: { "Thinwire-Protocol": "1", Authorization: "Bearer t" } };
  const send = (text: string, request: typeof target = bearer) => ({
    ...request,
    body: { contextId: "ctx-1", message: { text } },
    signal: signal(),
  });

  /** A server that identifies callers by a header: a socket opens only with a ticket. */
  function setupTickets(script: Partial<Script> = {}) {
    const log = newLog();
    let runs = 0;
    const server: Script = {
      requireTicket: true,
      run: () => {
        const r = runFrames("ctx-1", `run-${++runs}`, runs * 10);
        return { frames: [r.start(), r.done("ok")] };
      },
      ...script,
    };
    const { WebSocket, sockets } = fakeWebSocket(server, log);
    const fetchImpl = fakeFetch(server, log);
    const credentials: Array<RequestCredentials | undefined> = [];
    const fetch: typeof globalThis.fetch = (input, init) => {
      credentials.push(init?.credentials);
      return fetchImpl(input, init);
    };
    const transport = new WebSocketTransport({ WebSocket, fetch, credentials: "include" });
    return { transport, sockets, log, credentials };
  }

  it("with the app's headers, opens each socket with a fresh ticket fetched with those headers", async () => {
    const { transport, sockets, log, credentials } = setupTickets();
    expect((await collect(transport.run(send("one")))).map((frame) => frame.type)).toEqual(["run_start", "done"]);
    expect(sockets).toHaveLength(1);
    expect(sockets[0]!.url).toBe("wss://chat.test/tw/agents/demo%20bot/ws?ticket=ticket-1");
    expect(log.tickets).toEqual([{ accept: "application/json", authorization: "Bearer t", "thinwire-protocol": "1" }]);
    expect(credentials).toEqual(["include"]);

    // The open socket serves the next request: no new ticket.
    await collect(transport.run(send("two")));
    expect(log.tickets).toHaveLength(1);

    // A ticket opens one socket: the next connect fetches another.
    sockets[0]!.drop(1006);
    await collect(transport.run(send("three")));
    expect(sockets.map((socket) => socket.url)).toEqual([
      "wss://chat.test/tw/agents/demo%20bot/ws?ticket=ticket-1",
      "wss://chat.test/tw/agents/demo%20bot/ws?ticket=ticket-2",
    ]);
    expect(log.tickets).toHaveLength(2);
    expect(log.runs).toHaveLength(3);
  });

  it("appends the ticket to a socket URL of the url option", async () => {
    const log = newLog();
    const server: Script = { requireTicket: true, run: () => ({ frames: [runFrames("ctx-1", "run-1").start()] }) };
    const { WebSocket, sockets } = fakeWebSocket(server, log);
    const transport = new WebSocketTransport({ WebSocket, fetch: fakeFetch(server, log), url: "wss://ws.test/socket?v=1" });
    await collect(transport.attach({ ...bearer, contextId: "ctx-1", after: 0, signal: signal() }));
    expect(sockets[0]!.url).toBe("wss://ws.test/socket?v=1&ticket=ticket-1");
  });

  it("shares one ticket and one socket between requests made while it opens", async () => {
    const { transport, sockets, log } = setupTickets();
    const [one, two] = await Promise.all([collect(transport.run(send("one"))), collect(transport.run(send("two")))]);
    expect([one.length, two.length]).toEqual([2, 2]);
    expect(sockets).toHaveLength(1);
    expect(log.tickets).toHaveLength(1);
  });

  it("without headers of the app's own, fetches no ticket: cookies authenticate the socket", async () => {
    const { transport, sockets, log } = setupTickets({ requireTicket: false });
    await collect(transport.run(send("hi", target)));
    expect(sockets[0]!.url).toBe("wss://chat.test/tw/agents/demo%20bot/ws");
    expect(log.tickets).toEqual([]);
  });

  it("fails the request with the ticket request's typed error, and opens no socket", async () => {
    const { transport, sockets, log } = setupTickets({
      ticket: () => ({ error: { status: 401, code: "unauthenticated", message: "Sign in." } }),
    });
    const error = await failure(transport.run(send("hi")));
    expect(error).toMatchObject({ code: "unauthenticated", status: 401, retryable: false, message: "Sign in." });
    expect(sockets).toHaveLength(0);
    expect(log.tickets).toHaveLength(1);
    // The next request tries again, with a new ticket request.
    await failure(transport.run(send("again")));
    expect(log.tickets).toHaveLength(2);
  });

  it("reports a socket the server refused for want of a ticket as unauthenticated", async () => {
    const { transport } = setupTickets();
    const error = await failure(transport.run(send("hi", target)));
    expect(error).toMatchObject({ code: "unauthenticated", retryable: false });
  });

  it("opens no socket when closed while the ticket is fetched", async () => {
    const log = newLog();
    const server: Script = { requireTicket: true, run: () => ({ frames: [] }) };
    const { WebSocket, sockets } = fakeWebSocket(server, log);
    let answer: () => void = () => undefined;
    const slow: typeof fetch = async (input, init) => {
      await new Promise<void>((resolve) => (answer = resolve));
      return fakeFetch(server, log)(input, init);
    };
    const transport = new WebSocketTransport({ WebSocket, fetch: slow });
    const failed = failure(transport.run(send("hi")));
    await pause(1);
    transport.close();
    answer();
    expect((await failed).code).toBe("network_error");
    expect(sockets).toHaveLength(0);
  });
});

describe("WebSocketTransport handshake", () => {
  it("says a socket closed before it opened (1006) may have been refused, as a retryable network error", async () => {
    const { transport, sockets } = setup({ run: () => ({ frames: [] }) });
    const failed = failure(transport.run({ ...target, body: { message: { text: "hi" } }, signal: signal() }));
    sockets[0]!.drop(1006);
    const error = await failed;
    expect(error).toMatchObject({ code: "network_error", retryable: true });
    expect(error.message).toContain("handshake failed");
    expect(error.message).toContain("HTTP 403");
    expect(error.message).not.toContain("4403"); // no client sees the close code the server refuses with
  });
});

describe("WebSocketTransport on a socket gone silent (a half-open connection)", () => {
  afterEach(() => vi.useRealTimers());

  it("takes a socket following a run as broken after twice the heartbeat interval of silence, not before", async () => {
    vi.useFakeTimers();
    const stream = channel();
    const { transport, sockets } = setup({ run: () => ({ frames: stream.frames() }) });
    const r = runFrames("ctx-1", "run-1");
    const body = { contextId: "ctx-1", message: { text: "hi" } };
    const ran = failure(transport.run({ ...target, body, signal: signal() }));
    await vi.advanceTimersByTimeAsync(0);
    stream.push(r.start());
    await vi.advanceTimersByTimeAsync(20_000);
    sockets[0]!.receive(JSON.stringify({ type: "heartbeat" })); // the run is quiet, the socket alive
    await vi.advanceTimersByTimeAsync(29_999);
    expect(sockets[0]!.readyState).toBe(1);
    // A stop is answered by nothing but the socket's next message: sent into a dead one, it fails.
    const stopped = transport.stop({ ...target, contextId: "ctx-1" }).then(
      () => "answered",
      (error: unknown) => error,
    );
    await vi.advanceTimersByTimeAsync(1);
    const error = await ran;
    expect(error).toMatchObject({ code: "network_error", retryable: true });
    expect(error.message).toContain("30 s");
    expect(await stopped).toBe(error);
    expect(sockets[0]!.readyState).toBeGreaterThanOrEqual(2);
  });

  it("keeps a socket that follows nothing unwatched, and answers a stop sent on it at once", async () => {
    vi.useFakeTimers();
    const r = runFrames("ctx-1", "run-1");
    const { transport, sockets } = setup({ run: () => ({ frames: [r.start(), r.done("")] }) });
    const body = { contextId: "ctx-1", message: { text: "hi" } };
    const ran = collect(transport.run({ ...target, body, signal: signal() }));
    await vi.advanceTimersByTimeAsync(10);
    await ran;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sockets[0]!.readyState).toBe(1);
    await transport.stop({ ...target, contextId: "ctx-1" });
  });

  it("reattaches an AgentClient's stream on a new socket once the old one is taken as broken", async () => {
    vi.useFakeTimers();
    const r = runFrames("ctx-1", "run-1");
    const [start, hel, lo, done] = [r.start(), r.token("Hel"), r.token("lo"), r.done("Hello")];
    const stalled = channel(); // the run's socket: open, and nothing more comes through it
    const script: Script = {
      run: () => ({ frames: stalled.frames() }),
      attach: () => ({ frames: [lo!, done!] }),
    };
    const log = newLog();
    const { WebSocket, sockets } = fakeWebSocket(script, log);
    const client = new AgentClient({
      agent: "demo",
      baseUrl: target.baseUrl,
      transport: new WebSocketTransport({ WebSocket }),
      fetch: fakeFetch(script, log),
      reconnect: { attempts: 1, baseDelayMs: 1 },
    });
    const sent = client.send("hi");
    await vi.advanceTimersByTimeAsync(0);
    stalled.push(start!);
    stalled.push(hel!);
    await vi.advanceTimersByTimeAsync(29_000);
    expect(client.getSnapshot()).toMatchObject({ status: "streaming", error: null });
    expect(sockets).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1_100);
    expect((await sent).text).toBe("Hello");
    expect(sockets).toHaveLength(2);
    expect(sockets[1]!.sent.map((command) => [command.type, command.contextId])).toEqual([["attach", "ctx-1"]]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    client.dispose();
  });
});

describe("AgentClient over a WebSocket the server closes as it restarts", () => {
  it("takes 1012 (service restart) for a dropped socket: attaches again on its first try, then opens a new socket for the next send", async () => {
    expect(CLOSE_CODES[1012]).toBe("network_error");
    const r = runFrames("ctx-1", "run-1");
    const [start, hel, lo, done] = [r.start(), r.token("Hel"), r.token("lo"), r.done("Hello")];
    const next = runFrames("ctx-1", "run-2", 10);
    let sends = 0;
    const script: Script = {
      // The first run's socket stays open mid-run until the test closes it.
      run: () => (++sends === 1 ? { frames: [start!, hel!] } : { frames: [next.start(), next.done("Again")] }),
      attach: () => ({ frames: [lo!, done!] }),
    };
    const log = newLog();
    const { WebSocket, sockets } = fakeWebSocket(script, log);
    const transport = new WebSocketTransport({ WebSocket });
    // One try only: a close the client took for a refusal, or waited out, would fail the send.
    const client = new AgentClient({
      agent: "demo",
      baseUrl: target.baseUrl,
      transport,
      fetch: fakeFetch(script, log),
      reconnect: { attempts: 1, baseDelayMs: 1 },
    });
    const statuses: string[] = [];
    client.subscribe(() => {
      const status = client.getSnapshot().status;
      if (statuses[statuses.length - 1] !== status) statuses.push(status);
    });
    const sent = client.send("hi");
    await vi.waitFor(() => expect(client.getSnapshot().turns[1]?.text).toBe("Hel"));
    sockets[0]!.drop(1012, "service restart");
    expect((await sent).text).toBe("Hello");
    expect(statuses).toEqual(["streaming", "reconnecting", "streaming", "idle"]);
    expect(sockets).toHaveLength(2);
    expect(sockets[1]!.sent.map((command) => [command.type, command.contextId])).toEqual([["attach", "ctx-1"]]);
    // Closed while idle, the socket is opened again by the next send, with no error shown.
    sockets[1]!.drop(1012, "service restart");
    expect((await client.send("again")).text).toBe("Again");
    expect(sockets).toHaveLength(3);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    client.dispose();
  });
});
