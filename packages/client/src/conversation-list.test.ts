/**
 * ConversationList: pages and their cursor, refresh, rename, remove, and the
 * selection it shares with an AgentClient — whose runs, over either wire,
 * refresh the list.
 */
import { describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import { ConversationList, type ConversationListOptions } from "./conversation-list.js";
import type { ConversationSummary } from "./generated/wire.js";
import { conversationScript, fakeFetch, newLog, type Reply, runFrames, type Script, transcriptTurn } from "./testing/index.js";
import { refund, rejection, wires } from "./test-helpers.js";

/** A server with `count` conversations, the first one the least recently active. */
async function serverWith(count: number, script: Script = conversationScript()) {
  const log = newLog();
  const fetch = fakeFetch(script, log);
  const seed = new AgentClient({ agent: "demo", fetch });
  const ids: string[] = [];
  for (let index = 0; index < count; index++) {
    seed.reset();
    await seed.send(`message ${index}`);
    ids.push(seed.getSnapshot().contextId!);
  }
  seed.dispose();
  log.runs.length = 0;
  return { script, log, fetch, ids };
}

const titles = (list: ConversationList) => list.getSnapshot().conversations.map((item) => item.preview);

describe("ConversationList", () => {
  it("loads the caller's conversations a page at a time, with the server's cursor", async () => {
    const { fetch, log, ids } = await serverWith(5);
    const list = new ConversationList({ agent: "demo", baseUrl: "http://server.test/tw/", pageSize: 2, fetch });
    expect(list.getSnapshot()).toEqual({ conversations: [], loading: false, error: null, hasMore: false, selected: null });
    const started = list.start();
    expect(list.getSnapshot().loading).toBe(true);
    expect(list.start()).toBe(started);
    await started;
    expect(list.getSnapshot()).toMatchObject({ loading: false, hasMore: true, error: null });
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).toEqual([ids[4], ids[3]]);

    const more = list.loadMore();
    expect(list.loadMore()).toBe(more); // one page at a time
    await more;
    await list.loadMore();
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).toEqual([...ids].reverse());
    expect(list.getSnapshot().hasMore).toBe(false);
    await list.loadMore(); // nothing left: no request
    expect(log.listings).toEqual([
      { limit: 2, cursor: null },
      { limit: 2, cursor: expect.any(String) },
      { limit: 2, cursor: expect.any(String) },
    ]);

    // A refresh loads from the top as many as are shown.
    const before = list.getSnapshot();
    await list.refresh();
    expect(log.listings.at(-1)).toEqual({ limit: 5, cursor: null });
    expect(list.getSnapshot().conversations).toEqual(before.conversations);
    expect(list.getSnapshot().conversations).not.toBe(before.conversations);
  });

  it("sends the protocol header, the app's headers (read at each request) and its credentials", async () => {
    const { fetch } = await serverWith(1);
    const seen: Array<[string, Headers, RequestCredentials | undefined]> = [];
    const spy: typeof globalThis.fetch = async (input, init) => {
      seen.push([String(input), new Headers(init?.headers), init?.credentials]);
      return fetch(input, init);
    };
    let token = "one";
    const list = new ConversationList({
      agent: "demo bot",
      baseUrl: "https://api.test",
      fetch: spy,
      credentials: "include",
      get headers() {
        return { authorization: `Bearer ${token}` };
      },
    });
    await list.start();
    token = "two";
    await list.refresh();
    expect(seen.map(([url]) => url)).toEqual([
      "https://api.test/agents/demo%20bot/contexts?limit=20",
      "https://api.test/agents/demo%20bot/contexts?limit=20",
    ]);
    expect(seen.map(([, headers]) => [headers.get("authorization"), headers.get("Thinwire-Protocol")])).toEqual([
      ["Bearer one", "1"],
      ["Bearer two", "1"],
    ]);
    expect(seen.map(([, , credentials]) => credentials)).toEqual(["include", "include"]);
  });

  it("shows a page that failed as error, and clears it with the next that loads", async () => {
    let fail = true;
    const base = conversationScript();
    const { fetch } = await serverWith(1, {
      ...base,
      conversations: (query) => (fail ? { error: { status: 503, code: "store_unavailable", message: "Down." } } : base.conversations!(query)),
    });
    const list = new ConversationList({ agent: "demo", fetch });
    await list.start();
    expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [], error: { code: "store_unavailable", retryable: true } });
    fail = false;
    await list.refresh();
    expect(list.getSnapshot()).toMatchObject({ error: null, conversations: [{ preview: "You said “message 0”." }] });
  });

  it("drops a page a later refresh made stale", async () => {
    const { fetch, ids } = await serverWith(2);
    let hold: (() => void) | null = null;
    const slow: typeof globalThis.fetch = async (input, init) => {
      if (hold === null && String(input).includes("cursor")) await new Promise<void>((resolve) => (hold = resolve));
      return fetch(input, init);
    };
    const list = new ConversationList({ agent: "demo", pageSize: 1, fetch: slow });
    await list.start();
    const more = list.loadMore();
    await vi.waitFor(() => expect(hold).not.toBeNull());
    await list.refresh();
    hold!();
    await more;
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).toEqual([ids[1]]);
    expect(list.getSnapshot()).toMatchObject({ loading: false, hasMore: true });
  });

  it("renames a conversation, refusing a blank or too long title without a request", async () => {
    const { fetch, log, ids } = await serverWith(2);
    const list = new ConversationList({ agent: "demo", fetch });
    await list.start();
    const summary = await list.rename(ids[0]!, "Order 1234");
    expect(summary).toMatchObject({ contextId: ids[0], title: "Order 1234" });
    expect(list.getSnapshot().conversations.find((item) => item.contextId === ids[0])?.title).toBe("Order 1234");
    expect(log.renames).toEqual([{ contextId: ids[0], title: "Order 1234" }]);

    expect((await rejection(list.rename(ids[0]!, "   "))).code).toBe("invalid_request");
    expect((await rejection(list.rename(ids[0]!, "x".repeat(201)))).code).toBe("title_too_long");
    await list.rename(ids[0]!, "🙂".repeat(200)); // 200 characters, 400 UTF-16 units
    expect(log.renames).toHaveLength(2);

    const unknown = await rejection(list.rename("ctx-" + "f".repeat(36), "Hi"));
    expect(unknown).toMatchObject({ code: "context_not_found", status: 404 });
    expect(list.getSnapshot().error).toMatchObject({ code: "context_not_found" });
  });

  it("shows a rename refused without a request as error, as it shows the server's refusals", async () => {
    const { fetch, log, ids } = await serverWith(1);
    const list = new ConversationList({ agent: "demo", fetch });
    await list.start();
    expect((await rejection(list.rename(ids[0]!, " "))).code).toBe("invalid_request");
    expect(list.getSnapshot().error).toMatchObject({ code: "invalid_request", retryable: false });
    expect((await rejection(list.rename(ids[0]!, "y".repeat(201)))).code).toBe("title_too_long");
    expect(list.getSnapshot().error).toMatchObject({ code: "title_too_long", retryable: false });
    expect(log.renames).toEqual([]);
    await list.rename(ids[0]!, "Fine"); // a success clears it
    expect(list.getSnapshot().error).toBeNull();
  });

  it("removes a conversation; one the server no longer knows is gone all the same", async () => {
    const { fetch, log, ids, script } = await serverWith(3);
    const list = new ConversationList({ agent: "demo", fetch });
    await list.start();
    await list.remove(ids[1]!);
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).toEqual([ids[2], ids[0]]);
    expect(script.transcript!(ids[1]!)).toBeUndefined();
    await list.remove(ids[1]!);
    expect(log.forgets).toEqual([ids[1], ids[1]]);
    expect(list.getSnapshot().error).toBeNull();
  });

  it("keeps a selection of its own without a client", async () => {
    const { fetch, ids } = await serverWith(2);
    const list = new ConversationList({ agent: "demo", fetch });
    await list.start();
    await list.select(ids[0]!);
    expect(list.getSnapshot().selected).toBe(ids[0]);
    await list.remove(ids[0]!);
    expect(list.getSnapshot().selected).toBeNull();
    await list.select(ids[1]!);
    list.create();
    expect(list.getSnapshot().selected).toBeNull();
  });

  it("is done after dispose: no change, no request", async () => {
    const { fetch, log } = await serverWith(1);
    const list = new ConversationList({ agent: "demo", fetch });
    const listener = vi.fn();
    list.subscribe(listener);
    list.dispose();
    await list.start();
    await list.refresh();
    expect((await rejection(list.rename("ctx-1", "x"))).code).toBe("disposed");
    expect(listener).not.toHaveBeenCalled();
    expect(log.listings).toEqual([]);
  });

  it("shows a list with no page and no absolute baseUrl (Node.js) as invalid_url, without a request", async () => {
    const fetch = vi.fn(async (input: unknown) => {
      throw new TypeError(`Failed to parse URL from ${String(input)}`); // as Node's global fetch does
    });
    vi.stubGlobal("fetch", fetch);
    try {
      const list = new ConversationList({ agent: "demo" });
      await list.start();
      expect(list.getSnapshot()).toMatchObject({ loading: false, error: { code: "invalid_url", retryable: false } });
      expect(list.getSnapshot().error!.message).toContain('"/agents/demo/contexts?limit=20"');
      expect(fetch).not.toHaveBeenCalled();
    } finally {
      vi.unstubAllGlobals();
    }
  });

  it("takes a pageSize from 1 to 100 and refuses anything else with a TypeError, as AgentClient does", async () => {
    const { fetch, log } = await serverWith(1);
    for (const pageSize of [1, 100, undefined]) await new ConversationList({ agent: "demo", fetch, pageSize }).start();
    expect(log.listings.map(({ limit }) => limit)).toEqual([1, 100, 20]);
    const refused: Array<[unknown, string]> = [
      [0, "0"],
      [101, "101"],
      [2.5, "2.5"],
      [-1, "-1"],
      [Infinity, "Infinity"],
      [NaN, "NaN"],
      ["5", '"5"'],
      [null, "null"],
      [{ size: 5 }, "an object"],
    ];
    for (const [pageSize, named] of refused) {
      expect(() => new ConversationList({ agent: "demo", fetch, pageSize: pageSize as number })).toThrow(
        new TypeError(`pageSize must be a whole number from 1 to 100, not ${named}.`),
      );
    }
    expect(() => new AgentClient({ agent: "demo", pageSize: 0 })).toThrow(
      new TypeError("pageSize must be a whole number from 1 to 1000, or Infinity, not 0."),
    );
    expect(() => new AgentClient({ agent: "demo", pageSize: "50" as unknown as number })).toThrow(
      new TypeError('pageSize must be a whole number from 1 to 1000, or Infinity, not "50".'),
    );
  });

  it("refuses a baseUrl no request could reach the server with, as AgentClient does", () => {
    // Each was retried as a network fault (a browser's fetch refuses credentials in a
    // URL; a query is cut off by the routes appended), or left the page's origin while
    // it read like a path.
    const refused = [
      "http://user:pass@127.0.0.1:8000",
      "javascript:alert(1)//",
      "data:text/plain,x",
      "ftp://example.com",
      "http://127.0.0.1:8000?x=1",
      "http://127.0.0.1:8000/#top",
      "//evil.example",
      "/\\evil.example",
      "\\\\evil.example",
      "api",
      "http://",
      // `new URL` (and Node's fetch) take these for http://127.0.0.1:41801; a page's fetch
      // takes them for a path on the page's origin.
      "http:/127.0.0.1:41801",
      "HTTPS:/agents.example.com",
      "http:127.0.0.1:41801",
    ];
    for (const baseUrl of refused) {
      for (const make of [
        () => new ConversationList({ agent: "demo", baseUrl }),
        () => new AgentClient({ agent: "demo", baseUrl }),
      ]) {
        expect(make, baseUrl).toThrow(TypeError);
        expect(make, baseUrl).toThrow(/^baseUrl must be an http\(s\) URL or a path from the page's origin/);
      }
    }
    for (const baseUrl of ["", "/ai", "/ai/", "http://127.0.0.1:8000", "https://agents.example.com/v1/", "HTTPS://agents.example.com"]) {
      expect(() => new AgentClient({ agent: "demo", baseUrl }).dispose(), baseUrl).not.toThrow();
      expect(() => new ConversationList({ agent: "demo", baseUrl }).dispose(), baseUrl).not.toThrow();
    }
  });
});

describe.each(wires)("ConversationList sharing a client over %s", (_name, wire) => {
  function setup(options: Partial<ConversationListOptions> = {}) {
    const script = conversationScript({ answer: (text) => ({ text: `Re: ${text}`, title: text.toUpperCase() }) });
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const onContext = vi.fn();
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch, onContext });
    const list = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch, client, ...options });
    return { client, list, log, onContext, script, fetch };
  }

  it("refreshes after every run the client finishes, and selects the conversation the client shows", async () => {
    const { client, list, log } = setup();
    await list.start();
    expect(list.getSnapshot()).toMatchObject({ conversations: [], selected: null });
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    await vi.waitFor(() => expect(titles(list)).toEqual(["Re: first"]));
    expect(list.getSnapshot().selected).toBe(first);
    expect(list.getSnapshot().conversations[0]!.title).toBe("FIRST");

    list.create();
    expect(client.getSnapshot()).toMatchObject({ contextId: null, turns: [] });
    expect(list.getSnapshot().selected).toBeNull();
    await client.send("second");
    await vi.waitFor(() => expect(titles(list)).toEqual(["Re: second", "Re: first"]));
    await client.regenerate();
    await vi.waitFor(() => expect(list.getSnapshot().loading).toBe(false));
    // The first page, then one refresh per run that ended.
    expect(log.listings).toHaveLength(4);
  });

  it("loads the list once for a new conversation's first run, when the run ends", async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    const script = conversationScript({ answer: (text) => ({ text: `Re: ${text}`, until: held }) });
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch });
    const list = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch, client });
    await list.start();
    const sent = client.send("first");
    await vi.waitFor(() => expect(client.getSnapshot().contextId).not.toBeNull());
    expect(list.getSnapshot().selected).toBe(client.getSnapshot().contextId);
    release();
    await sent;
    await vi.waitFor(() => expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{ preview: "Re: first", status: "idle" }] }));
    // The first page, then the one the run's end asked for: none while it ran.
    expect(log.listings).toHaveLength(2);

    // A conversation opened that the list does not show (no run to wait for) is loaded at once.
    list.create();
    await client.send("second");
    await vi.waitFor(() => expect(list.getSnapshot().loading).toBe(false));
    const listings = log.listings.length;
    const narrow = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch, client, pageSize: 1 });
    await narrow.start();
    const first = list.getSnapshot().conversations[1]!.contextId;
    expect(narrow.getSnapshot().conversations.map((item) => item.contextId)).not.toContain(first);
    await client.open(first);
    await vi.waitFor(() => expect(narrow.getSnapshot().loading).toBe(false));
    expect(log.listings.length).toBe(listings + 2); // narrow's first page, then its refresh
    narrow.dispose();
    list.dispose();
    client.dispose();
  });

  it("loads the list again, once, when the client shows another branch: the row shows that branch", async () => {
    const { client, list, log } = setup();
    await list.start();
    await client.send("one");
    await client.send("two");
    await client.edit(client.getSnapshot().turns[0]!.id, "ONE edited");
    await vi.waitFor(() =>
      expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{ preview: "Re: ONE edited", turnCount: 2 }] }),
    );
    const listings = log.listings.length;
    await client.switchBranch(client.getSnapshot().turns[0]!.id, 0);
    expect(client.getSnapshot().turns).toHaveLength(4);
    await vi.waitFor(() =>
      expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{ preview: "Re: two", turnCount: 4 }] }),
    );
    expect(log.listings.length).toBe(listings + 1);
  });

  it("refreshes when a stop ends the run that waits for a decision, as when a run ends", async () => {
    const contextId = "ctx-" + "1".repeat(36);
    const r = runFrames(contextId, "run-1");
    let waiting = true;
    const user = transcriptTurn("user", "Refund order 1234", { id: "turn-000000000000-u0" });
    const asked = () => transcriptTurn("assistant", "Checking.", {
      id: "turn-000000000000-a0",
      stopReason: waiting ? "interrupted" : "stopped",
      asked: { request: refund, status: waiting ? "waiting" : "stopped", decision: null },
    });
    const script: Script = {
      run: () => ({ frames: [r.start({ turnId: "turn-000000000000-a0", userTurnId: "turn-000000000000-u0" }), r.title("Refund"), r.interrupt(refund), r.done("Checking.", [], "interrupted")] }),
      stop: () => {
        waiting = false;
      },
      transcript: () => ({ contextId, agent: "demo", title: "Refund", turns: [user, asked()], activeRunId: null, pendingInterrupt: waiting ? refund : null, hasEarlier: false }),
      conversations: () => ({
        conversations: [{ contextId, title: "Refund", createdAt: 1, updatedAt: 2, turnCount: 2, preview: "Checking.", status: waiting ? "waiting" : "idle" }],
        nextCursor: null,
      }),
    };
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch });
    const list = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch, client });
    await list.start();
    await client.send("Refund order 1234");
    expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: refund });
    await vi.waitFor(() => expect(list.getSnapshot().conversations[0]?.status).toBe("waiting"));
    await vi.waitFor(() => expect(list.getSnapshot().loading).toBe(false));
    const listings = log.listings.length;

    await client.stop();
    expect(log.stops).toEqual([contextId]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", interrupt: null });
    // The run ended: the list says so, loaded again once, as after any run.
    await vi.waitFor(() => expect(list.getSnapshot().conversations[0]?.status).toBe("idle"));
    await vi.waitFor(() => expect(list.getSnapshot().loading).toBe(false));
    expect(log.listings.length).toBe(listings + 1);
    list.dispose();
    client.dispose();
  });

  it("select opens the conversation in the client; create starts a new one", async () => {
    const { client, list, onContext } = setup();
    await list.start();
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    list.create();
    await client.send("second");
    await vi.waitFor(() => expect(list.getSnapshot().conversations).toHaveLength(2));

    await list.select(first);
    expect(client.getSnapshot()).toMatchObject({ contextId: first, status: "idle", title: "FIRST" });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["first", "Re: first"]);
    expect(list.getSnapshot().selected).toBe(first);
    expect(onContext.mock.calls.at(-1)).toEqual([first]);
    list.create();
    expect(onContext.mock.calls.at(-1)).toEqual([null]);
    expect(list.getSnapshot().selected).toBeNull();
  });

  it("shows a rename in the client that shows the conversation, and a title the client learns in the list", async () => {
    const { client, list } = setup();
    await list.start();
    await client.send("first");
    await vi.waitFor(() => expect(list.getSnapshot().conversations).toHaveLength(1));
    const id = client.getSnapshot().contextId!;
    await list.rename(id, "Renamed");
    expect(client.getSnapshot().title).toBe("Renamed");
    expect(list.getSnapshot().conversations[0]!.title).toBe("Renamed");
  });

  it("shows in the client the title a page lists for its conversation: a rename made elsewhere", async () => {
    const { client, list, script, fetch } = setup();
    await list.start();
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    await vi.waitFor(() => expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{ title: "FIRST" }] }));
    script.rename!(first, { title: "Named in another tab" });
    await list.refresh();
    expect(client.getSnapshot().title).toBe("Named in another tab");
    expect(list.getSnapshot().conversations[0]!.title).toBe("Named in another tab");

    // A page further down holds it too; a page without it changes nothing.
    list.create();
    await client.send("second");
    await list.select(first);
    script.rename!(first, { title: "Renamed again" });
    const paged = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch, client, pageSize: 1 });
    await paged.start();
    expect(client.getSnapshot().title).toBe("Named in another tab");
    await paged.loadMore();
    expect(client.getSnapshot().title).toBe("Renamed again");
    paged.dispose();
  });

  it("keeps a title the client learned after the page was read, or from a run whose end the server had not recorded", async () => {
    const base = conversationScript({
      autoTitle: true,
      answer: (text) => (text.startsWith("name it ") ? { text: "Named.", title: text.slice(8) } : `Re: ${text}`),
    });
    let opened = () => {};
    const gate = new Promise<void>((resolve) => (opened = resolve));
    /** The title the server lists while the run goes: it records the agent's once the run is over. */
    let lagging: string | null = null;
    const script: Script = {
      ...base,
      run: (body) => heldAfterTitle(base.run(body), gate),
      conversations: (query) => {
        const page = base.conversations!(query);
        if (lagging === null || "error" in page) return page;
        return { ...page, conversations: page.conversations.map((item) => ({ ...item, title: lagging })) };
      },
    };
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch });
    const { held, hold, waiting } = holdingPages(fetch);
    const list = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch: held, client });
    await list.start();
    await client.send("hello there");
    expect(client.getSnapshot().title).toBe("hello there"); // the server's, from the transcript
    const id = client.getSnapshot().contextId!;
    await vi.waitFor(() => expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{ title: "hello there" }] }));

    // A page read before a title frame arrives after it.
    hold.on = true;
    const older = list.refresh();
    await vi.waitFor(() => expect(waiting).toHaveLength(1));
    const named = client.send("name it Trip");
    await vi.waitFor(() => expect(client.getSnapshot().title).toBe("Trip"));
    waiting.shift()!();
    await older;
    expect(client.getSnapshot().title).toBe("Trip");
    expect(list.getSnapshot().conversations[0]!.title).toBe("Trip"); // the list agrees

    // A page read while the run goes lists the title from before it.
    hold.on = false;
    lagging = "hello there";
    await list.refresh();
    expect(client.getSnapshot().title).toBe("Trip");
    expect(list.getSnapshot().conversations[0]!.title).toBe("Trip");
    lagging = null;
    opened();
    await named;
    await vi.waitFor(() => expect(list.getSnapshot().loading).toBe(false));

    // A page read before a rename made through this list arrives after it.
    hold.on = true;
    const stale = list.refresh();
    await vi.waitFor(() => expect(waiting).toHaveLength(1));
    await list.rename(id, "Mine");
    waiting.shift()!();
    await stale;
    expect(client.getSnapshot().title).toBe("Mine");
    expect(list.getSnapshot().conversations[0]!.title).toBe("Mine");
    list.dispose();
    client.dispose();
  });

  it("resets the client when the conversation it shows is removed, and only then", async () => {
    const { client, list } = setup();
    await list.start();
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    list.create();
    await client.send("second");
    const second = client.getSnapshot().contextId!;
    await vi.waitFor(() => expect(list.getSnapshot().conversations).toHaveLength(2));

    await list.remove(first);
    expect(client.getSnapshot().contextId).toBe(second);
    await list.remove(second);
    expect(client.getSnapshot()).toMatchObject({ contextId: null, turns: [] });
    expect(list.getSnapshot()).toMatchObject({ conversations: [], selected: null });
  });

  it("drops a conversation the client finds deleted elsewhere as a request of it is refused, in the change that deselects it", async () => {
    const { client, list, fetch, log } = setup();
    await list.start();
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    list.create();
    await client.send("second");
    const second = client.getSnapshot().contextId!;
    await vi.waitFor(() => expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{ contextId: second }, { contextId: first }] }));
    // Another tab deletes the conversation shown; this list does not hear of it.
    expect((await fetch(`http://server.test/agents/demo/contexts/${second}`, { method: "DELETE" })).status).toBe(204);
    const seen = recorded(list, second);
    const listings = log.listings.length;

    expect((await rejection(client.send("still there?"))).code).toBe("context_not_found");
    expect(client.getSnapshot().contextId).toBeNull();
    // At once, with the selection: no moment lists it, and none lists it unselected.
    expect(seen[0]).toEqual({ selected: null, listed: false });
    expect(seen.filter((state) => state.listed)).toEqual([]);
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).toEqual([first]);
    // The refresh after the run it ended agrees.
    await vi.waitFor(() => expect(list.getSnapshot().loading).toBe(false));
    expect(log.listings.length).toBeGreaterThan(listings);
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).toEqual([first]);
  });

  it("drops a conversation deleted elsewhere that is selected, as the client forgets it on load", async () => {
    const { client, list, fetch, onContext } = setup();
    await list.start();
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    list.create();
    await client.send("second");
    await vi.waitFor(() => expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{}, { contextId: first }] }));
    expect((await fetch(`http://server.test/agents/demo/contexts/${first}`, { method: "DELETE" })).status).toBe(204);
    const seen = recorded(list, first);

    await list.select(first); // a stale row
    // Shown selected while it loads, then gone with its selection in one change: quietly, as a load forgets.
    expect(seen).toEqual([
      { selected: first, listed: true },
      { selected: null, listed: false },
    ]);
    expect(client.getSnapshot()).toMatchObject({ contextId: null, status: "idle", error: null });
    expect(onContext.mock.calls.slice(-2)).toEqual([[first], [null]]);
    expect(list.getSnapshot().conversations).toHaveLength(1);
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).not.toContain(first);
  });

  it("leaves a conversation the client found gone out of a page asked for before", async () => {
    const script = conversationScript();
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch });
    const { held, hold, waiting } = holdingPages(fetch);
    const list = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch: held, client });
    await list.start();
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    list.create();
    await client.send("second");
    const second = client.getSnapshot().contextId!;
    await vi.waitFor(() => expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{}, { contextId: first }] }));

    // A page the server read before another tab deleted the conversation, loaded after the client found it gone.
    hold.on = true;
    const older = list.refresh();
    await vi.waitFor(() => expect(waiting).toHaveLength(1));
    expect((await fetch(`http://server.test/agents/demo/contexts/${first}`, { method: "DELETE" })).status).toBe(204);
    await list.select(first);
    expect(list.getSnapshot().conversations.map((item) => item.contextId)).toEqual([second]);
    waiting.shift()!();
    await older;
    expect(list.getSnapshot()).toMatchObject({ conversations: [{ contextId: second }], selected: null, loading: false });

    // Pages asked for since are the server's as they come.
    hold.on = false;
    await client.send("third");
    await vi.waitFor(() => expect(list.getSnapshot()).toMatchObject({ loading: false, conversations: [{ preview: "You said “third”." }, { contextId: second }] }));
    list.dispose();
    client.dispose();
  });

  it("stops following the client once disposed", async () => {
    const { client, list, log } = setup();
    await list.start();
    list.dispose();
    await client.send("first");
    expect(log.listings).toHaveLength(1);
    expect(list.getSnapshot().selected).toBeNull();
  });
});

/** Every change of the list from now on: what it selects, and whether it lists `contextId`. */
function recorded(list: ConversationList, contextId: string): Array<{ selected: string | null; listed: boolean }> {
  const seen: Array<{ selected: string | null; listed: boolean }> = [];
  list.subscribe(() => {
    const { selected, conversations } = list.getSnapshot();
    seen.push({ selected, listed: conversations.some((item) => item.contextId === contextId) });
  });
  return seen;
}

/** `reply`, its frames held after its `title` frame until `gate` opens. */
function heldAfterTitle(reply: Reply, gate: Promise<void>): Reply {
  if (!("frames" in reply)) return reply;
  const { frames } = reply;
  return {
    ...reply,
    frames: (async function* () {
      for await (const frame of frames) {
        yield frame;
        if (frame.type === "title") await gate;
      }
    })(),
  };
}

/** A fetch whose pages of the list (read by the server at once) wait, while `hold.on`, until the test releases them. */
function holdingPages(fetch: typeof globalThis.fetch) {
  const waiting: Array<() => void> = [];
  const hold = { on: false };
  const held: typeof globalThis.fetch = async (input, init) => {
    const response = await fetch(input, init);
    if (hold.on && String(input).includes("/contexts?")) await new Promise<void>((resolve) => waiting.push(resolve));
    return response;
  };
  return { held, hold, waiting };
}

describe("ConversationList summaries", () => {
  it("keeps only what has an id, from a tolerant reading of the page", async () => {
    const page = {
      conversations: [{ contextId: "ctx-1", title: null, preview: "hi" }, { title: "no id" }, null],
      nextCursor: "",
      extra: true,
    };
    const fetch: typeof globalThis.fetch = async () => new Response(JSON.stringify(page), { headers: { "content-type": "application/json" } });
    const list = new ConversationList({ agent: "demo", fetch });
    await list.start();
    expect(list.getSnapshot().conversations).toEqual([{ contextId: "ctx-1", title: null, preview: "hi" } as unknown as ConversationSummary]);
    expect(list.getSnapshot().hasMore).toBe(false);
  });
});
