/**
 * AgentClient as a run ends: once the snapshot says idle (or error) the next
 * send is taken — from `onFinish`, `onError`, a listener, a microtask — while
 * what the ended run's job still does (a refresh, its callbacks) yields to it.
 */
import { describe, expect, it } from "vitest";
import { AgentClient, type AgentClientOptions } from "./agent-client.js";
import { ThinwireError } from "./errors.js";
import type { Frame } from "./generated/wire.js";
import type { SendResult } from "./send-result.js";
import {
  channel,
  conversationScript,
  fakeFetch,
  MockTransport,
  newLog,
  runFrames as run,
  transcriptTurn,
} from "./testing/index.js";
import { SseTransport } from "./sse-transport.js";
import { refund } from "./test-helpers.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);

function jsonResponse(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** The frames of run `n`: its turns are turn-u{n} and turn-a{n}, after turn-a{n-1}. */
function reply(n: number, text = `reply ${n}`): Frame[] {
  const r = run(CTX_1, `run-${n}`, n * 10);
  const start = r.start({ userTurnId: `turn-u${n}`, turnId: `turn-a${n}`, afterTurnId: n === 1 ? null : `turn-a${n - 1}` });
  return [start, r.title("Chat"), r.token("re"), r.done(text)];
}

/** A transport answering the sends with runs `from`, `from + 1`, …; `first` stands in for the first answer. */
function answering(from = 1, first?: () => Frame[]) {
  let n = from - 1;
  return new MockTransport(() => {
    n += 1;
    return n === from && first ? first() : reply(n);
  });
}

/** How an app acts once a run is over. `act` runs once, at that moment; `options` go into the client's. */
type Moment = (act: () => void) => {
  options: Partial<AgentClientOptions>;
  arm: (client: AgentClient) => void;
};

/** The first time the status, having been streaming, is `status`. */
function listenerOn(status: "idle" | "error", act: () => void, client: AgentClient, later = false): void {
  let streamed = false;
  let acted = false;
  client.subscribe(() => {
    const now = client.getSnapshot().status;
    if (now === "streaming") streamed = true;
    if (!streamed || acted || now !== status) return;
    acted = true;
    if (later) queueMicrotask(act);
    else act();
  });
}

const moments: Array<[string, Moment]> = [
  ["onFinish", (act) => ({ options: { onFinish: once(act) }, arm: () => undefined })],
  ["a listener that sees status idle", (act) => ({ options: {}, arm: (client) => listenerOn("idle", act, client) })],
  [
    "a microtask queued by that listener",
    (act) => ({ options: {}, arm: (client) => listenerOn("idle", act, client, true) }),
  ],
];

function once(act: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    act();
  };
}

describe.each(moments)("a send from %s", (_name, moment) => {
  it("is taken once a send's run is over", async () => {
    let second: Promise<SendResult> | null = null;
    const { options, arm } = moment(() => {
      expect(client.getSnapshot().status).toBe("idle");
      second = client.send("second");
    });
    const client = new AgentClient({ agent: "demo", transport: answering(), ...options });
    arm(client);
    const first = await client.send("first");
    expect(first.text).toBe("reply 1");
    await expect.poll(() => second).not.toBeNull();
    expect(await second!).toMatchObject({ text: "reply 2", stopReason: "end" });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["first", "reply 1", "second", "reply 2"]);
  });

  it("is taken once the run start() found in progress is over", async () => {
    const r = run(CTX_1, "run-1");
    const transcript = {
      contextId: CTX_1,
      agent: "demo",
      title: "Chat",
      turns: [transcriptTurn("user", "first", { id: "turn-u1" })],
      activeRunId: "run-1",
      pendingInterrupt: null,
      hasEarlier: false,
    };
    const transport = answering(2);
    const resumed = new MockTransport((request) => transport.run(request), {
      attach: () => [r.start({ turnId: "turn-a1", userTurnId: "turn-u1" }), r.token("re"), r.done("reply 1")],
    });
    let second: Promise<SendResult> | null = null;
    const { options, arm } = moment(() => {
      expect(client.getSnapshot().status).toBe("idle");
      second = client.send("second");
    });
    const client = new AgentClient({
      agent: "demo",
      contextId: CTX_1,
      transport: resumed,
      fetch: async () => jsonResponse(200, transcript),
      ...options,
    });
    arm(client);
    await client.start();
    await expect.poll(() => second).not.toBeNull();
    expect(await second!).toMatchObject({ text: "reply 2", stopReason: "end" });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["first", "reply 1", "second", "reply 2"]);
  });
});

describe("AgentClient once a run is over", () => {
  it("takes a decision from the onFinish of the run that asked, and a send from the onFinish of the decision's run", async () => {
    const r = run(CTX_1, "run-1");
    const transport = new MockTransport(
      () => {
        const next = run(CTX_1, "run-3", 20);
        return [next.start(), next.done("Anything else?")];
      },
      {
        decide: () => {
          const next = run(CTX_1, "run-2", 10);
          return [next.start(), next.done("Refunded.")];
        },
      },
    );
    const results: Array<Promise<SendResult>> = [];
    const client = new AgentClient({
      agent: "demo",
      transport: new MockTransport((request) =>
        results.length === 0 ? [r.start(), r.title("Refund"), r.interrupt(refund), r.done("Checking.", [], "interrupted")] : transport.run(request),
      { decide: (request) => transport.decide(request) }),
      onFinish: (result) => {
        if (result.stopReason === "interrupted") results.push(client.decide("approve"));
        else if (result.text === "Refunded.") results.push(client.send("thanks"));
      },
    });
    expect((await client.send("Refund order 1234")).stopReason).toBe("interrupted");
    await expect.poll(() => results.length).toBe(2);
    expect((await results[0]!).text).toBe("Refunded.");
    expect((await results[1]!).text).toBe("Anything else?");
  });

  it("takes a send from onError and from a listener on status error, after a run that failed or a refusal", async () => {
    const failed = () => {
      const r = run(CTX_1, "run-1");
      const start = r.start({ userTurnId: "turn-u1", turnId: "turn-a1" });
      return [start, r.title("Chat"), r.error("agent_error", "The agent failed."), r.done("", [], "error")];
    };
    let second: Promise<SendResult> | null = null;
    const client = new AgentClient({
      agent: "demo",
      transport: answering(1, failed),
      onError: once(() => (second = client.send("again"))),
    });
    expect((await client.send("first")).stopReason).toBe("error");
    expect(second).not.toBeNull();
    expect((await second!).text).toBe("reply 2");

    let count = 0;
    const refusing = new MockTransport(() => {
      count += 1;
      if (count === 1) throw new ThinwireError("message_too_large", "Too long.", { status: 413 });
      return reply(1, "ok");
    });
    const other = new AgentClient({ agent: "demo", transport: refusing });
    let retried: Promise<SendResult> | null = null;
    listenerOn("error", () => (retried = other.send("shorter")), other);
    await expect(other.send("too long")).rejects.toMatchObject({ code: "message_too_large" });
    expect(retried).not.toBeNull();
    expect((await retried!).text).toBe("ok");
  });

  it("refuses a send while the run is being read, up to its last frame", async () => {
    const stream = channel();
    const client = new AgentClient({ agent: "demo", transport: new MockTransport(() => stream.frames()) });
    const refusals: Array<Promise<unknown>> = [];
    client.subscribe(() => {
      const { status } = client.getSnapshot();
      if (status === "streaming" || status === "reconnecting") {
        refusals.push(client.send("too soon").catch((error: ThinwireError) => error.code));
      }
    });
    const r = run(CTX_1, "run-1");
    const sent = client.send("first");
    for (const frame of [r.start(), r.title("Chat"), r.token("re")]) stream.push(frame);
    await expect.poll(() => client.getSnapshot().turns.at(-1)?.text).toBe("re");
    stream.push(r.done("reply"));
    await sent;
    expect(refusals.length).toBeGreaterThanOrEqual(4); // the turns shown, then every frame but done
    expect(await Promise.all(refusals)).toEqual(refusals.map(() => "context_busy"));
  });

  it("shows the run of a send taken meanwhile, not the transcript a regeneration loads once its run is over", async () => {
    // The transcript the regeneration asks for, as it was before the send: shown, it would undo the send.
    const stale = {
      contextId: CTX_1,
      agent: "demo",
      title: "Chat",
      turns: [transcriptTurn("user", "one", { id: "turn-u1" }), transcriptTurn("assistant", "stale", { id: "turn-a2" })],
      activeRunId: null,
      pendingInterrupt: null,
      hasEarlier: false,
    };
    let release: (() => void) | null = null;
    const fetch = async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return jsonResponse(200, stale);
    };
    const transport = new MockTransport((request) => (request.body.message.text === "one" ? reply(1) : reply(3)), {
      regenerate: () => reply(2).map((frame) => (frame.type === "run_start" ? { ...frame, afterTurnId: "turn-u1" } : frame)),
    });
    const client = new AgentClient({ agent: "demo", transport, fetch });
    await client.send("one");
    let next: Promise<SendResult> | null = null;
    listenerOn("idle", () => (next = client.send("two")), client);
    const regenerated = client.regenerate();
    await expect.poll(() => next).not.toBeNull();
    expect((await next!).text).toBe("reply 3");
    await expect.poll(() => release).not.toBeNull(); // the regeneration's transcript, on its way
    release!();
    expect((await regenerated).text).toBe("reply 2");
    expect(client.getSnapshot().turns.map((turn) => [turn.id, turn.text])).toEqual([
      ["turn-u2", "one"], // a new exchange, of the regeneration
      ["turn-a2", "reply 2"],
      ["turn-u3", "two"],
      ["turn-a3", "reply 3"],
    ]);
  });

  it("learns the title the server gave with the next run, when a send taken at once left none shown", async () => {
    const log = newLog();
    const fetch = fakeFetch(conversationScript({ autoTitle: true }), log);
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport: new SseTransport({ fetch }), fetch });
    let second: Promise<SendResult> | null = null;
    listenerOn("idle", () => (second = client.send("two")), client);
    await client.send("one");
    await second!;
    expect(client.getSnapshot()).toMatchObject({ title: "one", status: "idle" });
  });

  it("still cancels the ended run's job with reset(): its send rejects as aborted", async () => {
    const log = newLog();
    const serve = fakeFetch(conversationScript(), log);
    let holding = false;
    let held: (() => void) | null = null;
    const fetch: typeof globalThis.fetch = async (input, init) => {
      if (holding && String(input).includes("/contexts/") && init?.method !== "POST") {
        await new Promise<void>((resolve) => (held = resolve));
      }
      return serve(input, init);
    };
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport: new SseTransport({ fetch: serve }), fetch });
    await client.send("one");
    holding = true;
    const regenerated = client.regenerate();
    await expect.poll(() => held).not.toBeNull(); // the run is over; its transcript is on its way
    expect(client.getSnapshot().status).toBe("idle");
    client.reset();
    held!();
    await expect(regenerated).rejects.toMatchObject({ code: "aborted" });
    expect(client.getSnapshot().turns).toEqual([]);
  });
});
