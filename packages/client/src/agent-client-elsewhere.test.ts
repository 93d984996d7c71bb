/**
 * AgentClient when another tab acted on the conversation shown: answered its
 * question (the run that answer continued is followed, as a reload would),
 * ran on after a run this tab saw end unseen, holds the conversation with a
 * run this tab did not see start (followed once a send or a switch of its own is refused),
 * or deleted the conversation (the next send starts a new one).
 */
import { describe, expect, it, vi } from "vitest";
import { AgentClient, type AgentClientOptions } from "./agent-client.js";
import { ThinwireError } from "./errors.js";
import type { ErrorCode, Transcript, TurnAsked } from "./generated/wire.js";
import type { Snapshot } from "./snapshot.js";
import { refund, rejection, wires } from "./test-helpers.js";
import {
  channel,
  conversationScript,
  fakeFetch,
  MockTransport,
  newLog,
  runFrames as run,
  transcriptTurn,
} from "./testing/index.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);
const CTX_2 = "ctx-" + "2".repeat(36);

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

function transcript(fields: Partial<Transcript>): Transcript {
  return { contextId: CTX_1, agent: "demo", title: "Refund", turns: [], activeRunId: null, pendingInterrupt: null, hasEarlier: false, ...fields };
}

function texts(snapshot: Snapshot): string[] {
  return snapshot.turns.map((turn) => turn.text);
}

describe("AgentClient after another tab ran on", () => {
  /** The message, and the reply that asked `refund`, as a transcript shows them. */
  const user = transcriptTurn("user", "Refund order 1234", { id: "turn-u1" });
  const asking = (asked: TurnAsked) =>
    transcriptTurn("assistant", "Checking.", { id: "turn-a1", stopReason: "interrupted", asked });

  it("follows the run another tab's answer continued, once its own answer is refused as answered already", async () => {
    const transcripts = [
      // What tab B opens: the question waits.
      transcript({ turns: [user, asking({ request: refund, status: "waiting", decision: null })], pendingInterrupt: refund }),
      // What it reads once refused: tab A's answer continues the run, which streams.
      transcript({ turns: [user, asking({ request: refund, status: "answered", decision: "approve" })], activeRunId: "run-2" }),
    ];
    const fetch = vi.fn(async () => jsonResponse(200, transcripts.shift()));
    const stream = channel();
    const transport = new MockTransport(() => [], {
      decide: () => {
        throw new ThinwireError("interrupt_answered", "Answered already.", { status: 409 });
      },
      attach: () => stream.frames(),
    });
    const onFinish = vi.fn();
    const onError = vi.fn();
    const tab = new AgentClient({ agent: "demo", contextId: CTX_1, transport, fetch, onFinish, onError });
    await tab.start();
    expect(tab.getSnapshot()).toMatchObject({ status: "idle", interrupt: refund });

    const refused = await rejection(tab.decide("approve"));
    expect(refused).toMatchObject({ code: "interrupt_answered", status: 409 });
    expect(onError.mock.calls).toEqual([[refused]]);
    expect(fetch).toHaveBeenCalledTimes(2);
    // The run the other answer continued, followed from its start as a reload would.
    expect(transport.attaches.map(({ contextId, after }) => [contextId, after])).toEqual([[CTX_1, 0]]);
    const r = run(CTX_1, "run-2", 10);
    stream.push(r.start({ turnId: "turn-a2", afterTurnId: "turn-a1" }));
    stream.push(r.token("Refun"));
    await vi.waitFor(() => expect(tab.getSnapshot().turns.at(-1)).toMatchObject({ text: "Refun", streaming: true }));
    // The refusal stays shown beside the run followed, as a message refused context_busy's does.
    expect(tab.getSnapshot()).toMatchObject({ status: "streaming", interrupt: null, error: { code: "interrupt_answered" } });
    // Nothing else goes meanwhile: the server would refuse it.
    expect((await rejection(tab.send("thanks"))).code).toBe("context_busy");

    stream.push(r.token("ded."));
    stream.push(r.done("Refunded."));
    await vi.waitFor(() => expect(onFinish).toHaveBeenCalledTimes(1));
    expect(tab.getSnapshot()).toMatchObject({ status: "idle", error: { code: "interrupt_answered" } });
    expect(texts(tab.getSnapshot())).toEqual(["Refund order 1234", "Checking.", "Refunded."]);
    expect(tab.getSnapshot().turns.map((turn) => turn.id)).toEqual(["turn-u1", "turn-a1", "turn-a2"]);
    expect(tab.getSnapshot().turns[1]!.asked).toEqual({ request: refund, status: "answered", decision: "approve" });
    expect(onFinish.mock.calls).toEqual([[{ text: "Refunded.", toolCalls: [], contextId: CTX_1, runId: "run-2", stopReason: "end" }]]);
  });

  const gone: Array<[ErrorCode, number]> = [
    ["interrupt_answered", 409],
    ["interrupt_not_found", 404],
  ];

  it.each(gone)("keeps %s shown from the refusal on, beside the continued run while it streams and after it", async (code, status) => {
    const transcripts = [
      transcript({ turns: [user, asking({ request: refund, status: "waiting", decision: null })], pendingInterrupt: refund }),
      transcript({ turns: [user, asking({ request: refund, status: "answered", decision: "approve" })], activeRunId: "run-2" }),
    ];
    const fetch = vi.fn(async () => jsonResponse(200, transcripts.shift()));
    const stream = channel();
    const transport = new MockTransport(() => [], {
      decide: () => {
        throw new ThinwireError(code, "Gone.", { status });
      },
      attach: () => stream.frames(),
    });
    const onFinish = vi.fn();
    const tab = new AgentClient({ agent: "demo", contextId: CTX_1, transport, fetch, onFinish });
    await tab.start();
    const errors: Array<string | null> = [];
    const unsubscribe = tab.subscribe(() => errors.push(tab.getSnapshot().error?.code ?? null));

    expect((await rejection(tab.decide("approve"))).code).toBe(code);
    expect(tab.getSnapshot()).toMatchObject({ status: "streaming", interrupt: null, error: { code } });
    const r = run(CTX_1, "run-2", 10);
    stream.push(r.start({ turnId: "turn-a2", afterTurnId: "turn-a1" }));
    stream.push(r.done("Refunded."));
    await vi.waitFor(() => expect(onFinish).toHaveBeenCalledTimes(1));
    expect(tab.getSnapshot()).toMatchObject({ status: "idle", error: { code } });
    unsubscribe();
    // Once shown, the error never left the view.
    const since = errors.slice(errors.indexOf(code));
    expect(since.length).toBeGreaterThan(1);
    expect(new Set(since)).toEqual(new Set([code]));
  });

  it.each(gone)("keeps %s shown over the conversation when the run another tab's answer continued is over already", async (code, status) => {
    const transcripts = [
      transcript({ turns: [user, asking({ request: refund, status: "waiting", decision: null })], pendingInterrupt: refund }),
      transcript({
        turns: [
          user,
          asking({ request: refund, status: "answered", decision: "approve" }),
          transcriptTurn("assistant", "Refunded.", { id: "turn-a2" }),
        ],
      }),
    ];
    const fetch = vi.fn(async () => jsonResponse(200, transcripts.shift()));
    const transport = new MockTransport(() => [], {
      decide: () => {
        throw new ThinwireError(code, "Gone.", { status });
      },
    });
    const onError = vi.fn();
    const tab = new AgentClient({ agent: "demo", contextId: CTX_1, transport, fetch, onError });
    await tab.start();

    const refused = await rejection(tab.decide("approve"));
    expect(refused.code).toBe(code);
    expect(onError.mock.calls).toEqual([[refused]]);
    expect(transport.attaches).toEqual([]);
    expect(tab.getSnapshot()).toMatchObject({ status: "error", interrupt: null, error: { code } });
    expect(texts(tab.getSnapshot())).toEqual(["Refund order 1234", "Checking.", "Refunded."]);
  });

  const movedOn: Array<[string, (client: AgentClient) => Promise<unknown>]> = [
    ["a send", (client) => client.send("two")],
    ["a regeneration", (client) => client.regenerate()],
  ];

  it.each(movedOn)("keeps branch_moved shown beside the run it follows once %s is refused so, and after it", async (_name, command) => {
    const hi = transcriptTurn("user", "hi", { id: "turn-u1" });
    const hello = transcriptTurn("assistant", "Hello", { id: "turn-a1" });
    const transcripts = [
      transcript({ turns: [hi, hello] }),
      // What it reads once refused: another tab went on, and its reply streams.
      transcript({ turns: [hi, hello, transcriptTurn("user", "more", { id: "turn-u2" })], activeRunId: "run-2" }),
    ];
    const fetch = vi.fn(async () => jsonResponse(200, transcripts.shift()));
    let refusing = true;
    const moved = () => {
      throw new ThinwireError("branch_moved", "The conversation moved on.", { status: 409 });
    };
    const r3 = run(CTX_1, "run-3", 20);
    const stream = channel();
    const transport = new MockTransport(
      () => (refusing ? moved() : [r3.start({ userTurnId: "turn-u3", turnId: "turn-a3", afterTurnId: "turn-a2" }), r3.done("Three.")]),
      { regenerate: moved, attach: () => stream.frames() },
    );
    const onFinish = vi.fn();
    const onError = vi.fn();
    const tab = new AgentClient({ agent: "demo", contextId: CTX_1, transport, fetch, onFinish, onError });
    await tab.start();
    const errors: Array<string | null> = [];
    const unsubscribe = tab.subscribe(() => errors.push(tab.getSnapshot().error?.code ?? null));

    const refused = await rejection(command(tab));
    expect(refused).toMatchObject({ code: "branch_moved", status: 409 });
    expect(onError.mock.calls).toEqual([[refused]]);
    expect(fetch).toHaveBeenCalledTimes(2);
    // The run the other tab started, followed with the refusal beside it, as for context_busy.
    expect(transport.attaches.map(({ contextId, after }) => [contextId, after])).toEqual([[CTX_1, 0]]);
    expect(tab.getSnapshot()).toMatchObject({ status: "streaming", error: { code: "branch_moved" } });
    const r2 = run(CTX_1, "run-2", 10);
    stream.push(r2.start({ userTurnId: "turn-u2", turnId: "turn-a2", afterTurnId: "turn-a1" }));
    stream.push(r2.token("More"));
    await vi.waitFor(() => expect(tab.getSnapshot().turns.at(-1)).toMatchObject({ text: "More", streaming: true }));
    expect(tab.getSnapshot()).toMatchObject({ status: "streaming", error: { code: "branch_moved" } });
    stream.push(r2.done("More."));
    await vi.waitFor(() => expect(onFinish).toHaveBeenCalledTimes(1));
    expect(tab.getSnapshot()).toMatchObject({ status: "idle", error: { code: "branch_moved" } });
    expect(texts(tab.getSnapshot())).toEqual(["hi", "Hello", "more", "More."]);
    unsubscribe();
    // Once shown, the error never left the view, the run followed opening included.
    const since = errors.slice(errors.indexOf("branch_moved"));
    expect(since.length).toBeGreaterThan(1);
    expect(new Set(since)).toEqual(new Set(["branch_moved"]));

    // Until the next send.
    refusing = false;
    expect((await tab.send("three")).text).toBe("Three.");
    expect(tab.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(fetch).toHaveBeenCalledTimes(2);
  });

  it("follows another tab's run found when its own ended unseen, after showing its own reply", async () => {
    const r1 = run(CTX_1, "run-1");
    const stream = channel();
    const transport = new MockTransport(
      // The stream breaks before `done`; the run ends on the server meanwhile.
      () => [r1.start({ userTurnId: "turn-u1", turnId: "turn-a1" }), r1.title("Chat"), r1.token("Hel")],
      { attach: ({ after }) => (after === 0 ? stream.frames() : []) },
    );
    const turns = [
      transcriptTurn("user", "hi", { id: "turn-u1" }),
      transcriptTurn("assistant", "Hello", { id: "turn-a1" }),
      transcriptTurn("user", "again", { id: "turn-u2" }), // another tab's message, its reply streaming
    ];
    const fetch = vi.fn(async () => jsonResponse(200, transcript({ title: "Chat", turns, activeRunId: "run-2" })));
    const onFinish = vi.fn();
    const tab = new AgentClient({ agent: "demo", transport, fetch, onFinish, reconnect: { baseDelayMs: 1 } });

    expect(await tab.send("hi")).toMatchObject({ text: "Hello", runId: "run-1", stopReason: "end" });
    expect(tab.getSnapshot().status).toBe("streaming");
    expect(texts(tab.getSnapshot())).toEqual(["hi", "Hello", "again", ""]);
    const r2 = run(CTX_1, "run-2", 10);
    stream.push(r2.start({ userTurnId: "turn-u2", turnId: "turn-a2", afterTurnId: "turn-a1" }));
    stream.push(r2.token("Hi again."));
    stream.push(r2.done("Hi again."));
    await vi.waitFor(() => expect(onFinish).toHaveBeenCalledTimes(2));
    expect(tab.getSnapshot().status).toBe("idle");
    expect(texts(tab.getSnapshot())).toEqual(["hi", "Hello", "again", "Hi again."]);
    expect(onFinish.mock.calls.map(([result]) => [result.runId, result.text])).toEqual([
      ["run-1", "Hello"],
      ["run-2", "Hi again."],
    ]);
  });

  it("follows another tab's run named by the transcript it loads once a regeneration is over", async () => {
    const r1 = run(CTX_1, "run-1");
    const r2 = run(CTX_1, "run-2", 10);
    const r3 = run(CTX_1, "run-3", 20);
    const transport = new MockTransport(() => [r1.start({ userTurnId: "turn-u1", turnId: "turn-a1" }), r1.title("Chat"), r1.done("Hello")], {
      regenerate: () => [r2.start({ userTurnId: "turn-u2", turnId: "turn-a2" }), r2.done("Hi")],
      attach: () => [r3.start({ userTurnId: "turn-u3", turnId: "turn-a3", afterTurnId: "turn-a2" }), r3.token("Fine."), r3.done("Fine.")],
    });
    const numbers = { siblings: 2, siblingIndex: 1 };
    const turns = [
      transcriptTurn("user", "hi", { id: "turn-u2", ...numbers }),
      transcriptTurn("assistant", "Hi", { id: "turn-a2", ...numbers }),
      transcriptTurn("user", "how are you?", { id: "turn-u3" }), // another tab's, sent as the regeneration ended
    ];
    const fetch = vi.fn(async () => jsonResponse(200, transcript({ title: "Chat", turns, activeRunId: "run-3" })));
    const onFinish = vi.fn();
    const tab = new AgentClient({ agent: "demo", transport, fetch, onFinish });
    await tab.send("hi");

    expect((await tab.regenerate()).text).toBe("Hi");
    expect(fetch).toHaveBeenCalledTimes(1); // the sibling counts, once the run is over
    await vi.waitFor(() => expect(onFinish).toHaveBeenCalledTimes(3));
    expect(tab.getSnapshot().status).toBe("idle");
    expect(tab.getSnapshot().turns.map((turn) => [turn.id, turn.text])).toEqual([
      ["turn-u2", "hi"],
      ["turn-a2", "Hi"],
      ["turn-u3", "how are you?"],
      ["turn-a3", "Fine."],
    ]);
    expect(onFinish.mock.calls.map(([result]) => result.runId)).toEqual(["run-1", "run-2", "run-3"]);
  });

  it("does not follow again the run it read to its done, which a transcript may name a moment longer", async () => {
    const r1 = run(CTX_1, "run-1");
    const r2 = run(CTX_1, "run-2", 10);
    const transport = new MockTransport(() => [r1.start({ userTurnId: "turn-u1", turnId: "turn-a1" }), r1.title("Chat"), r1.done("Hello")], {
      regenerate: () => [r2.start({ userTurnId: "turn-u2", turnId: "turn-a2" }), r2.done("Hi")],
    });
    const numbers = { siblings: 2, siblingIndex: 1 };
    const turns = [transcriptTurn("user", "hi", { id: "turn-u2", ...numbers }), transcriptTurn("assistant", "Hi", { id: "turn-a2", ...numbers })];
    const fetch = vi.fn(async () => jsonResponse(200, transcript({ title: "Chat", turns, activeRunId: "run-2" })));
    const tab = new AgentClient({ agent: "demo", transport, fetch });
    await tab.send("hi");
    expect((await tab.regenerate()).text).toBe("Hi");
    expect(transport.attaches).toEqual([]);
    expect(tab.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(texts(tab.getSnapshot())).toEqual(["hi", "Hi"]);
  });
});

describe("AgentClient when the conversation shown was deleted elsewhere", () => {
  const commands: Array<[string, (client: AgentClient) => Promise<unknown>]> = [
    ["a send", (client) => client.send("still there?")],
    ["a regeneration", (client) => client.regenerate()],
    ["an edit", (client) => client.edit(client.getSnapshot().turns[0]!.id, "still there?")],
    ["a branch switch", (client) => client.switchBranch(client.getSnapshot().turns[0]!.id, 0)],
  ];

  it.each(commands)("forgets it when %s is refused with context_not_found: the next send starts a new one", async (_name, command) => {
    const log = newLog();
    const fetch = fakeFetch(conversationScript({ autoTitle: true }), log);
    const onContext = vi.fn();
    const onError = vi.fn();
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", fetch, onContext, onError });
    await client.send("one");
    const deleted = client.getSnapshot().contextId!;
    // Another tab deletes the conversation.
    expect((await fetch(`http://server.test/agents/demo/contexts/${deleted}`, { method: "DELETE" })).status).toBe(204);

    const refusal = await rejection(command(client));
    expect(refusal).toMatchObject({ code: "context_not_found", status: 404 });
    expect(onError.mock.calls).toEqual([[refusal]]);
    // Forgotten, as a load forgets an id the server does not know: the stored id goes with it.
    expect(client.getSnapshot()).toMatchObject({
      contextId: null,
      turns: [],
      title: null,
      status: "error",
      error: { code: "context_not_found" },
    });
    expect(onContext.mock.calls).toEqual([[deleted], [null]]);

    const runs = log.runs.length;
    const next = await client.send("two");
    expect(log.runs[runs]).toEqual({ message: { text: "two" }, messageId: expect.any(String) }); // no contextId
    expect(next.contextId).not.toBe(deleted);
    expect(client.getSnapshot()).toMatchObject({ contextId: next.contextId, status: "idle", error: null });
    expect(texts(client.getSnapshot())).toEqual(["two", "You said “two”."]);
  });

  it("forgets it when a decision is refused with context_not_found", async () => {
    const onContext = vi.fn();
    const transport = new MockTransport(
      ({ body }) => {
        if (body.contextId === undefined && transport.requests.length > 1) {
          const next = run(CTX_2, "run-3");
          return [next.start(), next.title("Hi"), next.done("Hello again.")];
        }
        const r = run(CTX_1, "run-1");
        return [r.start(), r.title("Refund"), r.interrupt(refund), r.done("Checking.", [], "interrupted")];
      },
      {
        decide: () => {
          throw new ThinwireError("context_not_found", "No such conversation.", { status: 404 });
        },
      },
    );
    const client = new AgentClient({ agent: "demo", transport, onContext });
    await client.send("Refund order 1234");
    expect(client.getSnapshot().interrupt).toEqual(refund);

    expect(await rejection(client.decide("approve"))).toMatchObject({ code: "context_not_found", status: 404 });
    expect(client.getSnapshot()).toMatchObject({ contextId: null, turns: [], interrupt: null, error: { code: "context_not_found" } });
    expect(onContext.mock.calls).toEqual([[CTX_1], [null]]);

    expect((await client.send("hi")).text).toBe("Hello again.");
    expect(transport.requests[1]!.body.contextId).toBeUndefined();
    expect(client.getSnapshot()).toMatchObject({ contextId: CTX_2, status: "idle", error: null });
  });
});

describe.each(wires)("AgentClient while another tab's run streams, over %s", (_name, wire) => {
  /** Two tabs on one server; the first one's message "long" streams its reply until `release()`. */
  function setup() {
    let release = () => {};
    const until = new Promise<void>((resolve) => (release = resolve));
    const script = conversationScript({
      autoTitle: true,
      answer: (text) => (text === "long" ? { text: "A long answer.", until } : `You said “${text}”.`),
    });
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const make = (options: Partial<AgentClientOptions> = {}) =>
      new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch, reconnect: { baseDelayMs: 1 }, ...options });
    return { make, log, release, fetch };
  }

  const commands: Array<[string, (client: AgentClient) => Promise<unknown>]> = [
    ["a send", (client) => client.send("two")],
    ["a regeneration", (client) => client.regenerate()],
    ["an edit", (client) => client.edit(client.getSnapshot().turns[0]!.id, "uno")],
    ["a branch switch", (client) => client.switchBranch(client.getSnapshot().turns[0]!.id, 0)],
  ];

  it.each(commands)("follows that run once %s is refused with context_busy, then sends at the first try", async (_command, command) => {
    const { make, log, release } = setup();
    const first = make();
    await first.send("one");
    const onFinish = vi.fn();
    const onError = vi.fn();
    const second = make({ contextId: first.getSnapshot().contextId, onFinish, onError });
    await second.start();
    const shown = second.getSnapshot().turns;
    const sending = first.send("long");
    await vi.waitFor(() => expect(first.getSnapshot().turns.at(-1)?.text).toBe("A long answer."));

    const errors: Array<string | null> = [];
    const unsubscribe = second.subscribe(() => errors.push(second.getSnapshot().error?.code ?? null));
    const refused = await rejection(command(second));
    // Rejected as before, so a UI restores the draft, and told to onError; the view follows the run.
    expect(refused.code).toBe("context_busy");
    expect(onError.mock.calls).toEqual([[refused]]);
    // Shown as the server's refusals are (until the next send, or clearError), beside the run followed.
    expect(second.getSnapshot()).toMatchObject({ status: "streaming", error: { code: "context_busy", retryable: true } });
    await vi.waitFor(() => expect(second.getSnapshot().turns.at(-1)).toMatchObject({ text: "A long answer.", streaming: true }));
    expect(texts(second.getSnapshot())).toEqual(["one", "You said “one”.", "long", "A long answer."]);
    expect(second.getSnapshot().turns.slice(0, 2)).toEqual(shown);
    // Nothing else goes meanwhile, refused by the client itself: no request, no reload.
    const requests = [log.runs.length, log.regenerations.length, log.edits.length, log.transcripts.length];
    expect((await rejection(second.send("three"))).code).toBe("context_busy");
    expect([log.runs.length, log.regenerations.length, log.edits.length, log.transcripts.length]).toEqual(requests);
    // Once shown, the error never left the view, the run followed opening included.
    unsubscribe();
    const since = errors.slice(errors.indexOf("context_busy"));
    expect(since.length).toBeGreaterThan(1);
    expect(new Set(since)).toEqual(new Set(["context_busy"]));

    release();
    await sending;
    await vi.waitFor(() => expect(onFinish).toHaveBeenCalledTimes(1));
    expect(onFinish.mock.calls[0]![0]).toMatchObject({ text: "A long answer.", runId: "run-2", stopReason: "end" });
    expect(second.getSnapshot()).toMatchObject({ status: "idle", error: { code: "context_busy" } });
    expect(second.getSnapshot().turns.map((turn) => turn.id)).toEqual(first.getSnapshot().turns.map((turn) => turn.id));

    // Its view is current: the next send goes at the first try, after the run it followed.
    const loads = log.transcripts.length;
    expect((await second.send("three")).text).toBe("You said “three”.");
    expect(log.runs.at(-1)).toMatchObject({ message: { text: "three" }, afterTurnId: first.getSnapshot().turns[3]!.id });
    expect(log.transcripts.length).toBe(loads);
    expect(second.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(texts(second.getSnapshot())).toEqual(["one", "You said “one”.", "long", "A long answer.", "three", "You said “three”."]);
    expect(onError.mock.calls).toEqual([[refused]]); // a refusal of the client's own is not told
  });

  it("shows what the conversation holds once refused, when that run ended before the reload", async () => {
    const { make, release, log, fetch: base } = setup();
    const first = make();
    await first.send("one");
    // The run ends once the second tab, refused, asks for the transcript: it then names no run.
    let ended: Promise<unknown> | null = null;
    const fetch: typeof globalThis.fetch = async (input, init) => {
      if (ended) {
        release();
        await ended;
      }
      return base(input, init);
    };
    const second = make({ contextId: first.getSnapshot().contextId, fetch });
    await second.start();
    const sending = first.send("long");
    await vi.waitFor(() => expect(first.getSnapshot().turns.at(-1)?.text).toBe("A long answer."));
    const loads = log.transcripts.length;
    ended = sending;
    expect((await rejection(second.send("two"))).code).toBe("context_busy");
    expect(log.transcripts).toHaveLength(loads + 1);
    expect(second.getSnapshot()).toMatchObject({ status: "error", error: { code: "context_busy" } });
    expect(texts(second.getSnapshot())).toEqual(["one", "You said “one”.", "long", "A long answer."]);
    expect((await second.send("two")).text).toBe("You said “two”.");
  });
});
