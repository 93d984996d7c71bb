/**
 * AgentClient behaviour that must hold over every wire: the same scripted
 * server is reached once through SSE (a fake fetch) and once through a
 * WebSocket (a fake socket class).
 */
import { describe, expect, it } from "vitest";
import { AgentClient, type AgentClientOptions } from "./agent-client.js";
import type { InterruptRequest, Transcript } from "./generated/wire.js";
import {
  channel,
  newLog,
  runFrames,
  type Script,
  transcriptTurn,
} from "./testing/index.js";
import { rejection, wires } from "./test-helpers.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);
const CTX_7 = "ctx-" + "7".repeat(36);

function transcript(
  contextId: string,
  turns: Transcript["turns"],
  activeRunId: string | null = null,
  pendingInterrupt: InterruptRequest | null = null,
): Transcript {
  return { contextId, agent: "demo", title: null, turns, activeRunId, pendingInterrupt, hasEarlier: false };
}

/** A question a conversation waits for when it is loaded. */
const refundAsked: InterruptRequest = {
  interruptId: "int-1",
  prompt: "Refund?",
  options: ["approve", "reject"],
  payload: null,
  decisionSchema: null,
};

/** The wire's pattern of a `messageId`. */
const MESSAGE_ID = /^[A-Za-z0-9_.:-]{8,64}$/;

const until = async (check: () => boolean, what: string) => {
  for (let i = 0; i < 200; i++) {
    if (check()) return;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  throw new Error(`timed out waiting for ${what}`);
};

describe.each(wires)("AgentClient over %s", (_name, wire) => {
  function setup(script: Script, options: Partial<AgentClientOptions> = {}) {
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const client = new AgentClient({
      agent: "demo",
      baseUrl: "http://server.test/tw",
      transport,
      fetch,
      reconnect: { baseDelayMs: 1 },
      ...options,
    });
    const statuses: string[] = [];
    client.subscribe(() => {
      const status = client.getSnapshot().status;
      if (statuses[statuses.length - 1] !== status) statuses.push(status);
    });
    return { client, log, statuses };
  }

  it("streams a full run", async () => {
    const r = runFrames("ctx-1", "run-1");
    const { client, log } = setup({
      run: () => ({
        frames: [
          r.start(),
          r.thinking("Looking up."),
          r.call("c1", "weather"),
          r.result("c1", "weather"),
          r.token("Sun"),
          r.token("ny."),
          r.done("Sunny.", ["weather"]),
        ],
      }),
    });
    const result = await client.send("Weather?");
    expect(result).toEqual({ text: "Sunny.", toolCalls: ["weather"], contextId: "ctx-1", runId: "run-1", stopReason: "end" });
    expect(log.runs).toEqual([{ messageId: expect.stringMatching(MESSAGE_ID), message: { text: "Weather?" } }]);
    expect(client.getSnapshot()).toMatchObject({
      contextId: "ctx-1",
      status: "idle",
      thinking: "Looking up.",
      activity: [{ callId: "c1", name: "weather", state: "ok" }],
    });
    expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.streaming])).toEqual([
      ["user", "Weather?", false],
      ["assistant", "Sunny.", false],
    ]);
  });

  it("sends data with the message", async () => {
    const r = runFrames("ctx-1", "run-1");
    const { client, log } = setup({ run: () => ({ frames: [r.start(), r.done("ok")] }) });
    await client.send("Which order?", { data: { orderId: "1234", lines: [1, 2] } });
    expect(log.runs).toEqual([
      { messageId: expect.stringMatching(MESSAGE_ID), message: { text: "Which order?" }, data: { orderId: "1234", lines: [1, 2] } },
    ]);
  });

  it("recovers from errors: reports them, clearError returns to idle, a new send goes out", async () => {
    let runs = 0;
    const reported: Array<[string, unknown]> = [];
    const { client } = setup(
      {
        run: () => {
          runs += 1;
          const r = runFrames("ctx-1", `run-${runs}`, runs * 10);
          if (runs === 1) return { frames: [r.start(), r.error("agent_error", "The agent failed."), r.done("", [], "error")] };
          if (runs === 2) return { error: { status: 413, code: "data_too_large", message: "data exceeds 8192 bytes" } };
          return { frames: [r.start(), r.done("Fine now.")] };
        },
      },
      {
        onError: (error) => reported.push(["error", error.code]),
        onFinish: (result) => reported.push(["finish", result.stopReason]),
      },
    );
    expect((await client.send("one")).stopReason).toBe("error");
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "agent_error" } });
    client.clearError();
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });

    const tooMuch = await rejection(client.send("two", { data: { blob: "x".repeat(100) } }));
    expect(tooMuch.code).toBe("data_too_large");
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "data_too_large" } });

    // From status error, a send goes out and clears the error.
    expect((await client.send("three")).text).toBe("Fine now.");
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(reported).toEqual([
      ["error", "agent_error"],
      ["finish", "error"],
      ["error", "data_too_large"],
      ["finish", "end"],
    ]);
  });

  it("maps a refusal to its typed error", async () => {
    const { client } = setup(
      { run: () => ({ error: { status: 409, code: "context_busy", message: "A run is active." } }) },
      { contextId: "ctx-1" },
    );
    const error = await rejection(client.send("hi"));
    expect(error).toMatchObject({ code: "context_busy", message: "A run is active." });
    expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: "context_busy" } });
  });

  it("reattaches after a dropped stream and ends with the uninterrupted text", async () => {
    const r = runFrames("ctx-1", "run-1");
    const [start, hel, lo, world, done] = [r.start(), r.token("Hel"), r.token("lo"), r.token(" world"), r.done("Hello world")];
    const { client, log, statuses } = setup({
      run: () => ({ frames: [start!, hel!], cut: true }),
      // The server resends from `after`; the client still drops the duplicate `hel`.
      attach: () => ({ frames: [hel!, lo!, world!, done!] }),
    });
    let settled = 0;
    const result = await client.send("hi").finally(() => settled++);
    expect(result.text).toBe("Hello world");
    expect(log.attaches).toEqual([{ contextId: "ctx-1", after: 2 }]);
    expect(statuses).toEqual(["streaming", "reconnecting", "streaming", "idle"]);
    expect(log.runs).toHaveLength(1); // a frame arrived: the run is attached to, not sent again
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "Hello world", streaming: false, stopReason: "end" });
    expect(client.getSnapshot().turns).toHaveLength(2);
    expect(settled).toBe(1);
  });

  it("settles from the transcript when the run ended while disconnected", async () => {
    const r = runFrames("ctx-1", "run-1");
    const { client, log } = setup({
      run: () => ({ frames: [r.start(), r.token("Hel")], cut: true }),
      attach: () => ({ nothing: true }),
      transcript: (id) =>
        transcript(id, [
          transcriptTurn("user", "hi"),
          transcriptTurn("assistant", "Hello world", { toolCalls: ["lookup"] }),
        ]),
    });
    const before = client.getSnapshot().turns;
    const result = await client.send("hi");
    expect(before).toEqual([]);
    expect(result).toEqual({ text: "Hello world", toolCalls: ["lookup"], contextId: "ctx-1", runId: "run-1", stopReason: "end" });
    expect(log.transcripts).toEqual(["ctx-1"]);
    expect(client.getSnapshot().status).toBe("idle");
    expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.streaming])).toEqual([
      ["user", "hi", false],
      ["assistant", "Hello world", false],
    ]);
  });

  it("follows a run found in progress on start", async () => {
    const r = runFrames(CTX_7, "run-9", 5);
    const stream = channel();
    const { client, log, statuses } = setup(
      {
        run: () => ({ frames: [] }),
        attach: () => ({ frames: stream.frames() }),
        transcript: (id) =>
          transcript(
            id,
            [
              transcriptTurn("user", "Hello"),
              transcriptTurn("assistant", "Hi"),
              transcriptTurn("user", "Tell me more"),
            ],
            "run-9",
          ),
      },
      { contextId: CTX_7 },
    );
    await client.start();
    expect(client.getSnapshot().status).toBe("streaming");
    stream.push(r.start());
    stream.push(r.thinking("Hmm."));
    stream.push(r.token("More"));
    await until(() => client.getSnapshot().turns[3]?.text === "More", "the resumed reply");
    expect(client.getSnapshot().thinking).toBe("Hmm.");
    expect(log.attaches).toEqual([{ contextId: CTX_7, after: 0 }]);
    expect((await rejection(client.send("again"))).code).toBe("context_busy");
    stream.push(r.done("More text"));
    await until(() => client.getSnapshot().status === "idle", "idle");
    expect(statuses).toEqual(["hydrating", "streaming", "idle"]);
    expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.streaming])).toEqual([
      ["user", "Hello", false],
      ["assistant", "Hi", false],
      ["user", "Tell me more", false],
      ["assistant", "More text", false],
    ]);
    expect(log.runs).toEqual([]);
  });

  it("stops the run: the send resolves with stop reason stopped", async () => {
    const r = runFrames("ctx-1", "run-1");
    const stream = channel();
    const { client, log } = setup({
      run: () => ({ frames: stream.frames() }),
      stop: () => {
        stream.push(r.done("Hal", [], "stopped"));
        stream.end();
      },
    });
    const sent = client.send("Count to a million");
    stream.push(r.start());
    stream.push(r.token("Hal"));
    await until(() => client.getSnapshot().turns[1]?.text === "Hal", "the partial reply");
    await client.stop();
    const result = await sent;
    expect(log.stops).toEqual(["ctx-1"]);
    expect(result).toMatchObject({ text: "Hal", stopReason: "stopped" });
    expect(client.getSnapshot().status).toBe("idle");
    expect(client.getSnapshot().turns[1]).toMatchObject({ text: "Hal", stopReason: "stopped", streaming: false });
    await client.stop(); // nothing running: a no-op
    expect(log.stops).toEqual(["ctx-1"]);
  });

  describe("a reply whose stream could not be reattached", () => {
    // The server's ids, announced by run_start in place of the provisional ones the view gave.
    const reply = "turn-" + "a".repeat(12) + "-a3";
    const user = "turn-" + "a".repeat(12) + "-u2";
    const earlier = [
      transcriptTurn("user", "Hello", { id: "turn-" + "a".repeat(12) + "-u0" }),
      transcriptTurn("assistant", "Hi", { id: "turn-" + "a".repeat(12) + "-a1" }),
    ];
    // `detached`: this client stopped following the run, which may go on on the server.
    const closed = { id: reply, role: "assistant", text: "t. w0 ", streaming: false, stopReason: "detached" };
    const lost = () => ({ lost: true as const });
    const failure = (call: Promise<unknown>) => rejection(call).then((error) => error.code);

    /**
     * A run that streams a little; once the client shows it, `drop()` drops
     * its connection (a proxy, which refuses every reattach: `lost`).
     */
    function cutRun(runId: string, firstSeq = 1) {
      const r = runFrames(CTX_1, runId, firstSeq);
      const stream = channel();
      for (const frame of [r.start({ turnId: reply, userTurnId: user }), r.token("t. "), r.token("w0 ")]) stream.push(frame);
      return { reply: { frames: stream.frames(), cut: true }, drop: () => stream.end() };
    }

    /**
     * Drops the run once the client shows it; the client gives up (`gaveUp`:
     * the code of its error), and the partial reply is kept, closed, under the
     * server's id, stop reason `detached` — and stays so after clearError().
     */
    async function expectClosed(client: AgentClient, run: ReturnType<typeof cutRun>, gaveUp: Promise<string>) {
      await until(() => client.getSnapshot().turns.at(-1)?.text === "t. w0 ", "the partial reply");
      expect(client.getSnapshot().turns.at(-1)).toMatchObject({ ...closed, streaming: true, stopReason: null });
      run.drop();
      expect(await gaveUp).toBe("network_error");
      expect(client.getSnapshot().status).toBe("error");
      expect(client.getSnapshot().turns.at(-1)).toMatchObject(closed);
      expect(client.getSnapshot().turns.filter((turn) => turn.streaming)).toEqual([]);
      client.clearError();
      expect(client.getSnapshot().status).toBe("idle");
      expect(client.getSnapshot().turns.at(-1)).toMatchObject(closed);
    }

    it("is closed after a send", async () => {
      const run = cutRun("run-1");
      const { client, log } = setup({ run: () => run.reply, attach: lost }, { reconnect: { attempts: 2, baseDelayMs: 1 } });
      await expectClosed(client, run, failure(client.send("hi")));
      expect(log.attaches).toHaveLength(2);
      expect(client.getSnapshot().turns.map((turn) => [turn.id, turn.role, turn.text])).toEqual([
        [user, "user", "hi"],
        [reply, "assistant", "t. w0 "],
      ]);
    });

    it("is closed after a regeneration", async () => {
      const run = cutRun("run-2", 10);
      const { client } = setup(
        { run: () => ({ frames: [] }), regenerate: () => run.reply, attach: lost, transcript: (id) => transcript(id, [...earlier]) },
        { contextId: CTX_1, reconnect: { attempts: 1, baseDelayMs: 1 } },
      );
      await client.start();
      await expectClosed(client, run, failure(client.regenerate()));
      expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["Hello", "t. w0 "]);
    });

    it("is closed after a decision", async () => {
      const run = cutRun("run-2", 10);
      const asking = { ...earlier[1]!, stopReason: "interrupted" as const, asked: { request: refundAsked, status: "waiting" as const, decision: null } };
      const { client } = setup(
        {
          run: () => ({ frames: [] }),
          decide: () => run.reply,
          attach: lost,
          transcript: (id) => transcript(id, [earlier[0]!, asking], null, refundAsked),
        },
        { contextId: CTX_1, reconnect: { attempts: 1, baseDelayMs: 1 } },
      );
      await client.start();
      await expectClosed(client, run, failure(client.decide("approve")));
      expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["Hello", "Hi", "t. w0 "]);
    });

    it("is closed after a run found in progress on start", async () => {
      const run = cutRun("run-9");
      let attaches = 0;
      let reported: (code: string) => void = () => undefined;
      const gaveUp = new Promise<string>((resolve) => (reported = resolve));
      const { client } = setup(
        {
          run: () => ({ frames: [] }),
          attach: () => (++attaches === 1 ? run.reply : lost()),
          transcript: (id) => transcript(id, [...earlier, transcriptTurn("user", "More", { id: user })], "run-9"),
        },
        { contextId: CTX_1, reconnect: { attempts: 1, baseDelayMs: 1 }, onError: (error) => reported(error.code) },
      );
      await client.start();
      await expectClosed(client, run, gaveUp);
      expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["Hello", "Hi", "More", "t. w0 "]);
    });
  });

  describe("a send whose response never started", () => {
    const shown = (client: AgentClient) =>
      client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.streaming]);

    it("is sent again with the same messageId, and shows the run the first try started", async () => {
      let started = 0;
      const { client, log, statuses } = setup({
        run: (body) => {
          started += 1;
          const r = runFrames("ctx-1", `run-${started}`, 10 * started);
          const reply = `Re: ${body.message.text}`;
          // The server takes the send and runs it, but the response is cut before its first frame.
          return { frames: [r.start(), r.token(reply), r.done(reply)], cutAfter: 0 };
        },
      });

      const first = await client.send("one");
      expect(first).toEqual({ text: "Re: one", toolCalls: [], contextId: "ctx-1", runId: "run-1", stopReason: "end" });
      expect(statuses).toEqual(["streaming", "reconnecting", "streaming", "idle"]);
      const second = await client.send("two");
      expect(second).toMatchObject({ text: "Re: two", contextId: "ctx-1", runId: "run-2", stopReason: "end" });

      expect(started).toBe(2); // one run per message, however often it was sent
      expect(log.runs.map((body) => [body.contextId, body.message.text])).toEqual([
        [undefined, "one"],
        [undefined, "one"],
        ["ctx-1", "two"],
        ["ctx-1", "two"],
      ]);
      const ids = log.runs.map((body) => body.messageId);
      expect(ids[0]).toMatch(MESSAGE_ID);
      expect(ids[2]).toMatch(MESSAGE_ID);
      expect(ids[1]).toBe(ids[0]);
      expect(ids[3]).toBe(ids[2]);
      expect(ids[2]).not.toBe(ids[0]);
      expect(shown(client)).toEqual([
        ["user", "one", false],
        ["assistant", "Re: one", false],
        ["user", "two", false],
        ["assistant", "Re: two", false],
      ]);
      expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    });

    it("starts the run on the repeat when the first try never reached the server", async () => {
      let tries = 0;
      const { client, log } = setup({
        run: () => {
          tries += 1;
          if (tries === 1) return { lost: true };
          const r = runFrames("ctx-1", "run-1");
          return { frames: [r.start(), r.token("Hi"), r.done("Hi")] };
        },
      });
      const result = await client.send("hello");
      expect(result).toMatchObject({ text: "Hi", runId: "run-1", stopReason: "end" });
      expect(tries).toBe(2);
      expect(log.runs[1]).toEqual(log.runs[0]);
      expect(shown(client)).toEqual([
        ["user", "hello", false],
        ["assistant", "Hi", false],
      ]);
    });

    it("is sent again with the same data", async () => {
      let tries = 0;
      const { client, log } = setup({
        run: () => {
          tries += 1;
          if (tries === 1) return { lost: true };
          const r = runFrames("ctx-1", "run-1");
          return { frames: [r.start(), r.done("Hi")] };
        },
      });
      const data = { page: "/orders/1234", filters: { open: true } };
      await client.send("hello", { data });
      expect(log.runs).toHaveLength(2);
      expect(log.runs[0]!.data).toEqual(data);
      expect(log.runs[1]).toEqual(log.runs[0]);
    });

    it("gives up after the configured attempts, all with the same messageId", async () => {
      const { client, log, statuses } = setup(
        { run: () => ({ error: { status: 503, code: "store_unavailable", message: "The store did not answer." } }) },
        { reconnect: { attempts: 2, baseDelayMs: 1 } },
      );
      const error = await rejection(client.send("hello"));
      expect(error).toMatchObject({ code: "store_unavailable", retryable: true });
      expect(log.runs).toHaveLength(3);
      expect(new Set(log.runs.map((body) => body.messageId)).size).toBe(1);
      expect(statuses).toEqual(["streaming", "reconnecting", "error"]);
      expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code: "store_unavailable" } });
    });

    it.each([
      [400, "invalid_request"],
      [409, "context_busy"],
      [429, "rate_limited"],
      [429, "too_many_streams"],
      [429, "too_many_runs"],
      [413, "data_too_large"],
    ])("is not sent again after a %i %s: that is the server's answer", async (status, code) => {
      const { client, log, statuses } = setup(
        { run: () => ({ error: { status, code, message: "Refused." } }) },
        { contextId: "ctx-1" },
      );
      const error = await rejection(client.send("hello"));
      expect(error.code).toBe(code);
      expect(log.runs).toHaveLength(1);
      expect(statuses).toEqual(["streaming", "error"]);
      expect(client.getSnapshot()).toMatchObject({ status: "error", turns: [], error: { code } });
    });

    it("reset during the backoff aborts the send", async () => {
      const r = runFrames("ctx-1", "run-1");
      const { client, log } = setup(
        { run: () => ({ frames: [r.start(), r.done("Hi")], cutAfter: 0 }) },
        { reconnect: { baseDelayMs: 10_000 } },
      );
      const sent = client.send("hello");
      await until(() => client.getSnapshot().status === "reconnecting", "reconnecting");
      client.reset();
      expect((await rejection(sent)).code).toBe("aborted");
      expect(client.getSnapshot()).toMatchObject({ status: "idle", turns: [], contextId: null, error: null });
      expect(log.runs).toHaveLength(1);
    });
  });

  describe("human in the loop", () => {
    const refund: InterruptRequest = {
      interruptId: "int-1",
      prompt: "Refund $40 on order 1234?",
      options: ["approve", "reject"],
      payload: { order: "1234", amount: "$40" },
      decisionSchema: null,
    };
    const email: InterruptRequest = { ...refund, interruptId: "int-2", prompt: "Email the customer?", options: null };

    /**
     * A server that asks about the refund, then (on approve) whether to email
     * the customer, then ends; it refuses runs while a question is open.
     */
    function asker() {
      let pending: InterruptRequest | null = null;
      let runs = 0;
      const turns: Transcript["turns"] = [];
      const script: Script = {
        run: (body) => {
          if (pending) {
            return {
              error: { status: 409, code: "decision_pending", message: "Decide first.", interruptId: pending.interruptId },
            };
          }
          const r = runs === 0 ? runFrames(CTX_1, "run-1") : runFrames(CTX_1, `run-again-${runs}`, 100 * runs);
          runs += 1;
          pending = refund;
          turns.push(transcriptTurn("user", body.message.text));
          turns.push(transcriptTurn("assistant", "Checking.", { stopReason: "interrupted" }));
          return { frames: [r.start(), r.token("Checking."), r.interrupt(refund), r.done("Checking.", [], "interrupted")] };
        },
        decide: (_contextId, { interruptId, value }) => {
          if (!pending || pending.interruptId !== interruptId) {
            return { error: { status: 404, code: "interrupt_not_found", message: "No such interrupt." } };
          }
          if (pending === refund && value !== "approve" && value !== "reject") {
            return { error: { status: 400, code: "invalid_decision", message: "Choose approve or reject." } };
          }
          if (pending === refund && value === "approve") {
            const r = runFrames(CTX_1, "run-2", 10);
            pending = email;
            return {
              frames: [
                r.start(),
                r.call("c1", "issue_refund"),
                r.result("c1", "issue_refund"),
                r.token("Refunded."),
                r.interrupt(email),
                r.done("Refunded.", ["issue_refund"], "interrupted"),
              ],
            };
          }
          const r = runFrames(CTX_1, "run-3", 20);
          pending = null;
          return { frames: [r.start(), r.token(`Noted: ${String(value)}`), r.done(`Noted: ${String(value)}`)] };
        },
        stop: () => {
          if (!pending) return;
          pending = null;
          turns.push(transcriptTurn("assistant", "", { stopReason: "stopped" }));
        },
        // Named after its first message, as the server does (no title frame).
        transcript: (id) => ({ ...transcript(id, [...turns], null, pending), title: turns[0]?.text ?? null }),
      };
      return script;
    }

    it("asks, takes decisions and streams each continued run", async () => {
      const { client, log, statuses } = setup(asker());
      const first = await client.send("Refund order 1234");
      expect(first).toMatchObject({ text: "Checking.", stopReason: "interrupted" });
      expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: refund });

      const second = await client.decide("approve");
      expect(log.decisions).toEqual([{ contextId: CTX_1, interruptId: "int-1", value: "approve" }]);
      expect(second).toEqual({
        text: "Refunded.",
        toolCalls: ["issue_refund"],
        contextId: CTX_1,
        runId: "run-2",
        stopReason: "interrupted",
      });
      expect(client.getSnapshot()).toMatchObject({
        status: "idle",
        interrupt: email,
        activity: [{ callId: "c1", name: "issue_refund", state: "ok" }],
      });

      const third = await client.decide({ note: "Sorry for the delay" });
      expect(log.decisions[1]).toEqual({ contextId: CTX_1, interruptId: "int-2", value: { note: "Sorry for the delay" } });
      expect(third).toMatchObject({ runId: "run-3", stopReason: "end" });
      expect(client.getSnapshot().interrupt).toBeNull();
      expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.stopReason])).toEqual([
        ["user", "Refund order 1234", null],
        ["assistant", "Checking.", "interrupted"],
        ["assistant", "Refunded.", "interrupted"],
        ["assistant", "Noted: [object Object]", "end"],
      ]);
      expect(statuses).toEqual(["streaming", "idle", "streaming", "idle", "streaming", "idle"]);
      expect(log.runs).toHaveLength(1);
    });

    it("keeps the interrupt pending when the decision is refused", async () => {
      const { client, log } = setup(asker());
      await client.send("Refund order 1234");
      const turns = client.getSnapshot().turns;
      const error = await rejection(client.decide("maybe"));
      expect(error).toMatchObject({ code: "invalid_decision", message: "Choose approve or reject." });
      expect(log.decisions).toHaveLength(1);
      expect(client.getSnapshot()).toMatchObject({
        status: "error",
        interrupt: refund,
        error: { code: "invalid_decision" },
      });
      expect(client.getSnapshot().turns).toEqual(turns);
      // The question is still open: answering it properly works.
      expect((await client.decide("reject")).text).toBe("Noted: reject");
    });

    it("refuses a send while a decision is pending: locally, or by the server naming the interrupt", async () => {
      const script = asker();
      const { client, log } = setup(script);
      await client.send("Refund order 1234");
      const local = await rejection(client.send("Hello?"));
      expect(local).toMatchObject({ code: "decision_pending", interruptId: "int-1" });
      expect(log.runs).toHaveLength(1);

      // A second client on the same conversation that does not know of the question yet.
      const other = setup(script, { contextId: CTX_1 });
      const refused = await rejection(other.client.send("Hello?"));
      expect(refused).toMatchObject({ code: "decision_pending", interruptId: "int-1" });
      expect(other.client.getSnapshot()).toMatchObject({
        status: "error",
        error: { code: "decision_pending" },
        interrupt: refund,
      });
      expect(other.client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["Refund order 1234", "Checking."]);
    });

    it("hydrates the pending interrupt on start", async () => {
      const script = asker();
      await setup(script).client.send("Refund order 1234");
      const { client } = setup(script, { contextId: CTX_1 });
      await client.start();
      expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: refund });
      expect((await client.decide("approve")).stopReason).toBe("interrupted");
      expect(client.getSnapshot().interrupt).toEqual(email);
    });

    it("stop while a decision is pending ends the waiting run", async () => {
      const { client, log } = setup(asker());
      await client.send("Refund order 1234");
      const loads = log.transcripts.length;
      await client.stop();
      expect(log.stops).toEqual([CTX_1]);
      await until(() => log.transcripts.length === loads + 1, "the transcript");
      expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: null });
      expect(client.getSnapshot().turns.map((turn) => [turn.role, turn.text, turn.stopReason])).toEqual([
        ["user", "Refund order 1234", null],
        ["assistant", "Checking.", "interrupted"],
        ["assistant", "", "stopped"],
      ]);
      const again = await client.send("Start over");
      expect(again.stopReason).toBe("interrupted");
    });
  });
});
