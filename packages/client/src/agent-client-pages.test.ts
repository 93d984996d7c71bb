/**
 * Long conversations a page at a time: `pageSize`, `hasEarlier` and
 * `loadEarlier()` — what goes on the wire, what the view shows, and what
 * happens to an answer when the conversation changed or the history is gone.
 * One server keeps the conversations (`conversationScript`); each test reads
 * the transcript requests the client made of it.
 */
import { describe, expect, it, vi } from "vitest";
import { AgentClient, type AgentClientOptions } from "./agent-client.js";
import type { Transcript } from "./generated/wire.js";
import type { Snapshot } from "./snapshot.js";
import {
  channel,
  conversationScript,
  fakeFetch,
  MockTransport,
  newLog,
  runFrames,
  type Script,
  transcriptTurn,
} from "./testing/index.js";
import { rejection } from "./test-helpers.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);
const OLD_CTX = "ctx-" + "d".repeat(36);

const answer = (text: string) => `Re: ${text}`;

/**
 * A server that keeps conversations. `requests` lists its transcript requests
 * (`GET /contexts/…?limit=…`, `POST /contexts/…/branch?…`); `hold(part)` keeps
 * those whose path has `part` waiting until the function it returns is called.
 */
function server(script: Script = conversationScript({ answer })) {
  const serve = fakeFetch(script, newLog());
  const requests: string[] = [];
  type Held = { part: string; waiting: Array<() => void> };
  let held: Held | null = null;
  const fetch: typeof globalThis.fetch = async (input, init) => {
    const path = String(input).replace(/^.*\/agents\/demo/, "");
    if (path.startsWith("/contexts/") && !/\/(regenerate|edits)$/.test(path)) {
      requests.push(`${init?.method ?? "GET"} ${path}`);
      if (held && path.includes(held.part)) await new Promise<void>((resolve) => held!.waiting.push(resolve));
    }
    return serve(input, init);
  };
  const hold = (part: string) => {
    const holding: Held = { part, waiting: [] };
    held = holding;
    return () => {
      held = null;
      for (const resume of holding.waiting) resume();
    };
  };
  return { fetch, requests, hold };
}

/** A conversation of `count` exchanges, written by a client of its own; its id. */
async function conversation(fetch: typeof globalThis.fetch, count: number, first = 1): Promise<string> {
  const writer = new AgentClient({ agent: "demo", fetch });
  for (let index = first; index < first + count; index++) await writer.send(`m${index}`);
  const contextId = writer.getSnapshot().contextId!;
  writer.dispose();
  return contextId;
}

/** The user messages shown, in order. */
function messages(snapshot: Snapshot): string[] {
  return snapshot.turns.filter((turn) => turn.role === "user").map((turn) => turn.text);
}

/** A conversation script whose reads of an earlier page (`before`) are refused with `code`. */
function refusingEarlier(status: number, code: string, base: Script = conversationScript({ answer })): Script {
  return {
    ...base,
    transcript: (contextId, query) =>
      query?.before ? { error: { status, code, message: "Refused." } } : base.transcript!(contextId, query),
  };
}

describe("AgentClient pages of a transcript", () => {
  async function resumed(count: number, options: Partial<AgentClientOptions> = {}) {
    const { fetch, requests, hold } = server();
    const contextId = await conversation(fetch, count);
    requests.length = 0;
    const client = new AgentClient({ agent: "demo", fetch, contextId, pageSize: 2, ...options });
    await client.start();
    return { client, contextId, fetch, requests, hold };
  }

  it("starts with the last page, and shows whether exchanges precede it", async () => {
    const { client, contextId, requests } = await resumed(5);
    expect(requests).toEqual([`GET /contexts/${contextId}?limit=2`]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", hasEarlier: true });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["m4", "Re: m4", "m5", "Re: m5"]);

    const { client: short } = await resumed(2);
    expect(short.getSnapshot().hasEarlier).toBe(false);
    expect(messages(short.getSnapshot())).toEqual(["m1", "m2"]);
  });

  it("loadEarlier shows the page before the first turn, with the server's ids, until there is none", async () => {
    const { client, contextId, fetch, requests } = await resumed(5);
    const firstShown = client.getSnapshot().turns[0]!.id;
    await client.loadEarlier();
    expect(requests[1]).toBe(`GET /contexts/${contextId}?limit=2&before=${firstShown}`);
    expect(messages(client.getSnapshot())).toEqual(["m2", "m3", "m4", "m5"]);
    expect(client.getSnapshot().hasEarlier).toBe(true);

    await client.loadEarlier();
    expect(messages(client.getSnapshot())).toEqual(["m1", "m2", "m3", "m4", "m5"]);
    expect(client.getSnapshot()).toMatchObject({ hasEarlier: false, status: "idle", error: null });

    // Nothing precedes: no request.
    const shown = client.getSnapshot();
    await client.loadEarlier();
    expect(requests).toHaveLength(3);
    expect(client.getSnapshot()).toBe(shown);

    // The turns are those of the whole transcript, ids and all.
    const whole = new AgentClient({ agent: "demo", fetch, contextId, pageSize: Infinity });
    await whole.start();
    expect(requests[3]).toBe(`GET /contexts/${contextId}`);
    expect(shown.turns).toEqual(whole.getSnapshot().turns);
  });

  it("asks for 50 exchanges by default, and refuses a pageSize the server would not take", async () => {
    const { requests, contextId } = await resumed(1, { pageSize: undefined });
    expect(requests).toEqual([`GET /contexts/${contextId}?limit=50`]);
    for (const pageSize of [0, -1, 1.5, 1001, Number.NaN, -Infinity, "20" as unknown as number]) {
      expect(() => new AgentClient({ agent: "demo", pageSize })).toThrow(TypeError);
    }
    expect(() => new AgentClient({ agent: "demo", pageSize: 1000 })).not.toThrow();
  });

  it("makes one request for calls made while one is in flight", async () => {
    const { client, requests, hold } = await resumed(5);
    const release = hold("before=");
    const first = client.loadEarlier();
    expect(client.loadEarlier()).toBe(first);
    await vi.waitFor(() => expect(requests).toHaveLength(2));
    release();
    await first;
    expect(requests).toHaveLength(2);
    expect(messages(client.getSnapshot())).toEqual(["m2", "m3", "m4", "m5"]);
    // Once it is over, the next call asks for the next page.
    await client.loadEarlier();
    expect(requests).toHaveLength(3);
  });

  it.each(["open", "reset"] as const)("drops the answer when %s changes the conversation meanwhile", async (change) => {
    const { client, fetch, requests, hold } = await resumed(5);
    const other = await conversation(fetch, 1, 10);
    const release = hold("before=");
    const loading = client.loadEarlier();
    await vi.waitFor(() => expect(requests.some((request) => request.includes("before="))).toBe(true));
    if (change === "open") await client.open(other);
    else client.reset();
    const shown = client.getSnapshot();
    release();
    await expect(loading).resolves.toBeUndefined();
    expect(client.getSnapshot()).toBe(shown);
    expect(messages(shown)).toEqual(change === "open" ? ["m10"] : []);
    expect(shown.hasEarlier).toBe(false);
  });

  it("drops the answer when another branch is shown meanwhile, and then reads along that one", async () => {
    const { client, requests, hold } = await resumed(3, { pageSize: 1 });
    await client.regenerate(); // m3 answered again: the page shows the new exchange
    const regenerated = client.getSnapshot().turns;
    expect(messages(client.getSnapshot())).toEqual(["m3"]);
    const release = hold("before=");
    const loading = client.loadEarlier();
    await vi.waitFor(() => expect(requests.some((request) => request.includes("before="))).toBe(true));
    await client.switchBranch(regenerated[0]!.id, 0);
    const switched = client.getSnapshot();
    expect(switched.turns[0]!.id).not.toBe(regenerated[0]!.id);
    release();
    await loading;
    expect(client.getSnapshot()).toBe(switched);

    await client.loadEarlier();
    expect(requests.at(-1)).toContain(`before=${switched.turns[0]!.id}`);
    expect(messages(client.getSnapshot())).toEqual(["m2", "m3"]);
  });

  it("shows the latest page again when the turn it reads before is gone (turn_not_found)", async () => {
    const { fetch, requests } = server(refusingEarlier(404, "turn_not_found"));
    const contextId = await conversation(fetch, 5);
    const client = new AgentClient({ agent: "demo", fetch, contextId, pageSize: 2 });
    await client.start();
    // Meanwhile, another tab goes on with the conversation.
    const other = new AgentClient({ agent: "demo", fetch, contextId, pageSize: 2 });
    await other.start();
    await other.send("m6");
    requests.length = 0;

    await expect(client.loadEarlier()).resolves.toBeUndefined();
    expect(requests).toEqual([
      `GET /contexts/${contextId}?limit=2&before=${client.getSnapshot().turns[0]!.id}`,
      `GET /contexts/${contextId}?limit=2`,
    ]);
    expect(messages(client.getSnapshot())).toEqual(["m4", "m5", "m6"]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null, hasEarlier: true });
  });

  it("drops the latest page it read instead, once a send taken meanwhile shows its run", async () => {
    const { fetch } = server(refusingEarlier(404, "turn_not_found", conversationScript({ answer, autoTitle: true })));
    const contextId = await conversation(fetch, 5);
    let holding = false;
    let release: (() => void) | null = null;
    const client = new AgentClient({
      agent: "demo",
      contextId,
      pageSize: 2,
      fetch: async (input, init) => {
        const response = await fetch(input, init); // the page as the server has it now
        if (holding && String(input).endsWith(`/contexts/${contextId}?limit=2`)) {
          holding = false;
          await new Promise<void>((resolve) => (release = resolve));
        }
        return response;
      },
    });
    await client.start();
    holding = true;
    const earlier = client.loadEarlier();
    await expect.poll(() => release).not.toBeNull(); // the latest page, read before the send
    expect((await client.send("m6")).text).toBe("Re: m6");
    release!();
    await expect(earlier).resolves.toBeUndefined();
    expect(messages(client.getSnapshot())).toEqual(["m4", "m5", "m6"]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
  });

  it("rejects on any other failure, leaving the view as it was and onError untold", async () => {
    const { fetch } = server(refusingEarlier(503, "store_unavailable"));
    const contextId = await conversation(fetch, 5);
    const onError = vi.fn();
    const client = new AgentClient({ agent: "demo", fetch, contextId, pageSize: 2, onError });
    await client.start();
    const shown = client.getSnapshot();

    expect(await rejection(client.loadEarlier())).toMatchObject({ code: "store_unavailable", retryable: true });
    expect(client.getSnapshot()).toBe(shown);
    expect(shown).toMatchObject({ status: "idle", error: null, hasEarlier: true });
    expect(onError).not.toHaveBeenCalled();
  });

  it("sends no limit with pageSize Infinity, and takes an older server's transcript as whole", async () => {
    const older = {
      contextId: OLD_CTX,
      agent: "demo",
      title: null,
      turns: [
        { role: "user", text: "Hello", toolCalls: [], stopReason: null },
        { role: "assistant", text: "Hi", toolCalls: [], stopReason: "end" },
      ],
      activeRunId: null,
      pendingInterrupt: null,
    };
    const fetch = vi.fn(async (..._args: Parameters<typeof globalThis.fetch>) =>
      new Response(JSON.stringify(older), { headers: { "content-type": "application/json" } }),
    );
    const whole = new AgentClient({ agent: "demo", fetch, contextId: OLD_CTX, pageSize: Infinity });
    await whole.start();
    expect(String(fetch.mock.calls[0]![0])).toBe(`/agents/demo/contexts/${OLD_CTX}`);

    // An older server ignores limit and sends no hasEarlier: nothing precedes what it sent.
    const paged = new AgentClient({ agent: "demo", fetch, contextId: OLD_CTX, pageSize: 2 });
    await paged.start();
    expect(String(fetch.mock.calls[1]![0])).toBe(`/agents/demo/contexts/${OLD_CTX}?limit=2`);
    expect(paged.getSnapshot()).toMatchObject({ hasEarlier: false, status: "idle" });
    expect(messages(paged.getSnapshot())).toEqual(["Hello"]);
    await paged.loadEarlier();
    expect(fetch).toHaveBeenCalledTimes(2);
  });

  it("shows a page that is the whole branch alone, whatever was shown before it", async () => {
    const turns = ["1", "2"].flatMap((n) => [
      transcriptTurn("user", `m${n}`, { id: `turn-u${n}` }),
      transcriptTurn("assistant", `Re: m${n}`, { id: `turn-a${n}` }),
    ]);
    const page = (shown: typeof turns): Transcript => ({
      contextId: CTX_1,
      agent: "demo",
      title: null,
      turns: shown,
      activeRunId: null,
      pendingInterrupt: null,
      hasEarlier: false,
    });
    // The branch switched to begins at the second exchange (the server let the first one go).
    const script: Script = { run: () => ({ frames: [] }), transcript: () => page(turns), branch: () => page(turns.slice(2)) };
    const client = new AgentClient({ agent: "demo", fetch: server(script).fetch, contextId: CTX_1, pageSize: 2 });
    await client.start();
    await client.switchBranch("turn-u2", 0);
    expect(messages(client.getSnapshot())).toEqual(["m2"]);
    expect(client.getSnapshot().hasEarlier).toBe(false);
  });

  it("posts a branch switch with the page size, and reloads after a regeneration with it", async () => {
    const { client, contextId, requests } = await resumed(3);
    await client.regenerate();
    await client.switchBranch(client.getSnapshot().turns.at(-1)!.id, 0);
    expect(requests.slice(1)).toEqual([`GET /contexts/${contextId}?limit=2`, `POST /contexts/${contextId}/branch?limit=2`]);
  });
});

describe("AgentClient.loadEarlier while a run streams", () => {
  async function streaming(reconnect: AgentClientOptions["reconnect"] = {}) {
    const { fetch } = server(conversationScript({ answer, autoTitle: true }));
    const contextId = await conversation(fetch, 3);
    const stream = channel();
    const transport = new MockTransport(() => stream.frames());
    const client = new AgentClient({ agent: "demo", fetch, transport, contextId, pageSize: 1, reconnect });
    await client.start();
    return { client, contextId, stream };
  }

  it("prepends the page and leaves the streaming reply to its run", async () => {
    const { client, contextId, stream } = await streaming();
    const last = client.getSnapshot().turns.at(-1)!.id;
    const sent = client.send("m4");
    const r = runFrames(contextId, "run-4", 100);
    stream.push(r.start({ turnId: "turn-x-a8", userTurnId: "turn-x-u7", afterTurnId: last }));
    stream.push(r.token("Hel"));
    await vi.waitFor(() => expect(client.getSnapshot().turns.at(-1)!.text).toBe("Hel"));

    await client.loadEarlier();
    expect(client.getSnapshot().turns.map((turn) => [turn.text, turn.streaming])).toEqual([
      ["m2", false],
      ["Re: m2", false],
      ["m3", false],
      ["Re: m3", false],
      ["m4", false],
      ["Hel", true],
    ]);
    expect(client.getSnapshot()).toMatchObject({ status: "streaming", hasEarlier: true });

    stream.push(r.token("lo"));
    await vi.waitFor(() => expect(client.getSnapshot().turns.at(-1)!.text).toBe("Hello"));
    stream.push(r.done("Hello!"));
    expect((await sent).text).toBe("Hello!");
    const { turns } = client.getSnapshot();
    expect(turns).toHaveLength(6);
    expect(turns.slice(-2).map((turn) => [turn.id, turn.text, turn.streaming])).toEqual([
      ["turn-x-u7", "m4", false],
      ["turn-x-a8", "Hello!", false],
    ]);
    expect(messages(client.getSnapshot())).toEqual(["m2", "m3", "m4"]);
  });

  it("keeps the page when a send it went alongside fails before its first frame", async () => {
    const { client, stream } = await streaming({ attempts: 0 });
    const sent = client.send("lost");
    await client.loadEarlier();
    stream.fail(new TypeError("connection lost"));
    expect((await rejection(sent)).code).toBe("network_error");
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["m2", "Re: m2", "m3", "Re: m3"]);
    expect(client.getSnapshot()).toMatchObject({ status: "error", hasEarlier: true });
  });
});
