/**
 * Turn ids, per-turn detail, titles, and the branching commands — regenerate,
 * edit, switchBranch — over every wire: one server that keeps conversations
 * (`conversationScript`), reached through SSE and through a WebSocket (the
 * branch switch and the transcripts go over HTTP either way).
 */
import { describe, expect, it, vi } from "vitest";
import { AgentClient, type AgentClientOptions } from "./agent-client.js";
import type { Frame } from "./generated/wire.js";
import type { Snapshot } from "./snapshot.js";
import {
  channel,
  conversationScript,
  fakeFetch,
  newLog,
  runFrames,
  type Script,
  transcriptTurn,
} from "./testing/index.js";
import { refund, rejection, wires } from "./test-helpers.js";

const MESSAGE_ID = /^[A-Za-z0-9_.:-]{8,64}$/;

/** The turns as [role, text, siblingIndex/siblings]. */
function shown(snapshot: Snapshot): Array<[string, string, string]> {
  return snapshot.turns.map((turn) => [turn.role, turn.text, `${turn.siblingIndex + 1}/${turn.siblings}`]);
}

/** A demo-like agent: quotes the first message of the branch and counts words; names the conversation. */
const answer = (text: string, history: readonly { role: string; text: string }[]) => ({
  text: `“${text}”, ${text.split(/\s+/).length} words; first: “${history[0]?.text ?? text}”.`,
  thinking: "Counting words.",
  tools: [{ name: "count_words" }],
  title: `About ${text}`,
});

/** `base` as an older server answers: its `run_start` frames without `field`. */
function olderServer(base: Script, field: "afterTurnId" | "branchSwitched"): Script {
  const older = (frame: Frame): Frame => {
    if (frame.type !== "run_start") return frame;
    const { [field]: _, ...rest } = frame;
    return rest as Frame;
  };
  return {
    ...base,
    run: (body) => {
      const reply = base.run(body);
      return "frames" in reply ? { frames: [...(reply.frames as Frame[])].map(older) } : reply;
    },
  };
}

describe.each(wires)("branches over %s", (_name, wire) => {
  function setup(script: Script = conversationScript({ answer }), options: Partial<AgentClientOptions> = {}) {
    const log = newLog();
    const { transport, fetch } = wire(script, log);
    const make = (more: Partial<AgentClientOptions> = {}) =>
      new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch, reconnect: { baseDelayMs: 1 }, ...options, ...more });
    return { client: make(), make, log, script, fetch };
  }

  /** Two tabs of one conversation of two exchanges ("one", "two"), both showing it. */
  async function twoTabs(script?: Script) {
    const { client: first, make, log } = setup(script);
    await first.send("one");
    await first.send("two");
    const second = make({ contextId: first.getSnapshot().contextId });
    await second.start();
    return { first, second, make, log };
  }

  it("a tab that missed another tab's exchange is refused with branch_moved, shown the conversation, and sends again", async () => {
    const errors: string[] = [];
    const { client: first, make, log } = setup();
    await first.send("one");
    const second = make({ contextId: first.getSnapshot().contextId, onError: (error) => errors.push(error.code) });
    await second.start();
    const shownInSecond = second.getSnapshot().turns;
    await first.send("two"); // the second tab does not see this one
    const loads = log.transcripts.length;
    const texts = (snapshot: Snapshot) => snapshot.turns.filter((turn) => turn.role === "user").map((turn) => turn.text);
    const refused = await rejection(second.send("three"));
    // Nothing recorded; the view shows what the conversation holds now, the error with it.
    expect(refused.code).toBe("branch_moved");
    expect(log.runs.at(-1)).toMatchObject({ message: { text: "three" }, afterTurnId: shownInSecond[1]!.id });
    expect(log.transcripts.length).toBe(loads + 1);
    expect(texts(second.getSnapshot())).toEqual(["one", "two"]);
    expect(second.getSnapshot().turns.map((turn) => turn.id)).toEqual(first.getSnapshot().turns.map((turn) => turn.id));
    expect(second.getSnapshot()).toMatchObject({ status: "error", error: { code: "branch_moved" } });
    expect(errors).toEqual(["branch_moved"]);
    // Sent again, it follows what the tab now shows.
    await second.send("three");
    expect(texts(second.getSnapshot())).toEqual(["one", "two", "three"]);
    expect(log.runs.at(-1)!.afterTurnId).toBe(first.getSnapshot().turns[3]!.id);
    expect(second.getSnapshot()).toMatchObject({ status: "idle", error: null });
    // A tab that missed nothing loads no transcript after its send.
    expect(log.transcripts.length).toBe(loads + 1);
  });

  it("a tab left on a branch another tab switched away from sends and regenerates on its own branch", async () => {
    const { first, second, make, log } = await twoTabs();
    const before = second.getSnapshot().turns;
    await first.regenerate(); // the server's branch is the first tab's now
    expect(first.getSnapshot().turns[3]!.id).not.toBe(before[3]!.id);
    const loads = log.transcripts.length;
    await second.send("three");
    // The message answers what the second tab's user saw, and its reply reads that branch.
    expect(log.runs.at(-1)!.afterTurnId).toBe(before[3]!.id);
    expect(second.getSnapshot().turns.slice(0, 4).map((turn) => turn.id)).toEqual(before.map((turn) => turn.id));
    expect(shown(second.getSnapshot()).map(([role, text]) => `${role}: ${text}`).slice(-2)).toEqual([
      "user: three",
      "assistant: “three”, 1 words; first: “one”.",
    ]);
    // The run made the second tab's branch the one shown again, and said so: the transcript,
    // loaded once the run is over, shows the alternative the first tab made of "two".
    expect(log.transcripts.length).toBe(loads + 1);
    expect(shown(second.getSnapshot()).map(([, , index]) => index)).toEqual(["1/1", "1/1", "1/2", "1/2", "1/1", "1/1"]);
    // A reload shows the branch the second tab went on with.
    const third = make({ contextId: first.getSnapshot().contextId });
    await third.start();
    expect(third.getSnapshot().turns.map((turn) => turn.id)).toEqual(second.getSnapshot().turns.map((turn) => turn.id));

    // The first tab shows its regenerated branch again; the third regenerates the reply it shows.
    await first.switchBranch(before[3]!.id, 1);
    await third.regenerate();
    expect(log.regenerations.at(-1)!.turnId).toBe(second.getSnapshot().turns[5]!.id);
    expect(third.getSnapshot().turns.slice(0, 4).map((turn) => turn.id)).toEqual(before.map((turn) => turn.id));
    expect(shown(third.getSnapshot()).slice(-2)).toEqual([
      ["user", "three", "2/2"],
      ["assistant", "“three”, 1 words; first: “one”.", "2/2"],
    ]);
  });

  it("a tab left on a branch another tab switched away from shows the server's sibling counts once a run switched back", async () => {
    const { first, second, log } = await twoTabs();
    const before = second.getSnapshot().turns;
    await first.edit(before[0]!.id, "uno"); // the server's branch is the first tab's now
    const loads = log.transcripts.length;
    // A regeneration loads the transcript in any case; the numbers are the server's.
    await second.regenerate();
    expect(log.regenerations.at(-1)).toMatchObject({ turnId: before[3]!.id });
    expect(log.transcripts.length).toBe(loads + 1);
    expect(shown(second.getSnapshot()).map(([, , index]) => index)).toEqual(["1/2", "1/2", "2/2", "2/2"]);
    // The first tab's view is behind now, its branch no longer the one shown: its send switches back, and loads once.
    await first.send("dos");
    expect(log.transcripts.length).toBe(loads + 2);
    expect(shown(first.getSnapshot()).map(([, text, index]) => `${text.split(",")[0]} ${index}`)).toEqual([
      "uno 2/2",
      "“uno” 2/2",
      "dos 1/1",
      "“dos” 1/1",
    ]);
    // Sent again on the branch shown, nothing was switched: nothing is loaded.
    await first.send("tres");
    expect(log.transcripts.length).toBe(loads + 2);
  });

  it("loads no transcript after a run that does not say it switched the branch shown (an older server)", async () => {
    const script = olderServer(conversationScript({ answer }), "branchSwitched");
    const { first, second, log } = await twoTabs(script);
    await first.regenerate();
    const loads = log.transcripts.length;
    await second.send("three");
    expect(log.transcripts.length).toBe(loads);
    // Its arrows show what it loaded last, until it loads the transcript again.
    expect(shown(second.getSnapshot()).map(([, , index]) => index)).toEqual(["1/1", "1/1", "1/1", "1/1", "1/1", "1/1"]);
  });

  it("a tab left on a branch another tab switched away from edits a message it shows there", async () => {
    const { first, second, log } = await twoTabs();
    const before = second.getSnapshot().turns;
    await first.edit(before[0]!.id, "uno"); // the server's branch is the first tab's now
    await second.edit(before[2]!.id, "deux");
    // The edit forks beside "two", on the branch the second tab shows: "one" stays before it.
    expect(log.edits.at(-1)).toMatchObject({ turnId: before[2]!.id });
    expect(shown(second.getSnapshot()).map(([role, text, index]) => `${role}: ${text} ${index}`)).toEqual([
      "user: one 1/2",
      "assistant: “one”, 1 words; first: “one”. 1/2",
      "user: deux 2/2",
      "assistant: “deux”, 1 words; first: “one”. 2/2",
    ]);
    expect(second.getSnapshot().turns[0]!.id).toBe(before[0]!.id);
  });

  it("a regeneration of a reply the conversation went on from is refused with branch_moved, and the view reloaded", async () => {
    const { client: first, make, log } = setup();
    await first.send("one");
    const second = make({ contextId: first.getSnapshot().contextId });
    await second.start();
    await first.send("two");
    const regenerations = log.regenerations.length;
    const refused = await rejection(second.regenerate());
    expect(refused.code).toBe("branch_moved");
    expect(log.regenerations).toHaveLength(regenerations + 1);
    expect(second.getSnapshot().turns.map((turn) => [turn.id, turn.text])).toEqual(
      first.getSnapshot().turns.map((turn) => [turn.id, turn.text]),
    );
    expect(second.getSnapshot().status).toBe("error");
  });

  it("a tab showing a later page names its last turn", async () => {
    const { client: first, make, log } = setup(conversationScript({ answer }), { pageSize: 1 });
    await first.send("one");
    await first.send("two");
    const second = make({ contextId: first.getSnapshot().contextId });
    await second.start();
    expect(second.getSnapshot()).toMatchObject({ hasEarlier: true, turns: [{ text: "two" }, expect.anything()] });
    await second.send("three");
    expect(log.runs.at(-1)!.afterTurnId).toBe(first.getSnapshot().turns[3]!.id);
    expect(log.runs[0]).not.toHaveProperty("afterTurnId"); // a new conversation follows nothing
  });

  it("a tab that missed another tab's exchange, on a server that does not follow the turn named, shows the whole conversation after its send", async () => {
    const base = conversationScript({ answer });
    // A server that appends to the branch it shows, whatever the client names (as before `afterTurnId`).
    const script: Script = { ...base, run: ({ afterTurnId: _, ...body }) => base.run(body) };
    const { client: first, make, log } = setup(script);
    await first.send("one");
    const second = make({ contextId: first.getSnapshot().contextId });
    await second.start();
    await first.send("two"); // the second tab does not see this one
    const loads = log.transcripts.length;
    await second.send("three");
    const texts = (snapshot: Snapshot) => snapshot.turns.filter((turn) => turn.role === "user").map((turn) => turn.text);
    expect(texts(second.getSnapshot())).toEqual(["one", "two", "three"]);
    expect(second.getSnapshot().turns.map((turn) => turn.id)).toEqual(first.getSnapshot().turns.map((turn) => turn.id).concat(
      second.getSnapshot().turns.slice(-2).map((turn) => turn.id),
    ));
    expect(log.transcripts.length).toBe(loads + 1); // the transcript, loaded once the run was over
    // A tab that missed nothing loads no transcript after its send.
    await second.send("four");
    expect(log.transcripts.length).toBe(loads + 1);
  });

  it("keeps the server's turn ids from the stream to a reload, with each reply's thinking and tools", async () => {
    const { client, make } = setup();
    await client.send("one two");
    await client.send("three");
    const streamed = client.getSnapshot();
    expect(streamed.turns.map((turn) => turn.id)).toEqual([
      expect.stringMatching(/^turn-.*-u1$/),
      expect.stringMatching(/^turn-.*-a2$/),
      expect.stringMatching(/^turn-.*-u3$/),
      expect.stringMatching(/^turn-.*-a4$/),
    ]);
    expect(streamed.turns[3]).toMatchObject({
      thinking: "Counting words.",
      activity: [{ callId: "call-1", name: "count_words", state: "ok" }],
      toolCalls: ["count_words"],
    });
    expect(streamed.title).toBe("About one two");

    const reloaded = make({ contextId: streamed.contextId });
    await reloaded.start();
    const hydrated = reloaded.getSnapshot();
    expect(hydrated.turns.map((turn) => turn.id)).toEqual(streamed.turns.map((turn) => turn.id));
    expect(hydrated.turns.map(({ meta: _meta, ...turn }) => turn)).toEqual(streamed.turns.map(({ meta: _meta, ...turn }) => turn));
    expect(hydrated.turns[3]!.meta.finishedAt).toEqual(expect.any(Number));
    expect(hydrated.title).toBe("About one two");
  });

  it("shows a title frame as the run streams it", async () => {
    const stream = channel();
    const r = runFrames("ctx-1", "run-1");
    const { client } = setup({ run: () => ({ frames: stream.frames() }) });
    const sent = client.send("hi");
    stream.push(r.start({ turnId: "turn-a2", userTurnId: "turn-u1" }));
    stream.push(r.title("Greetings"));
    await vi.waitFor(() => expect(client.getSnapshot().title).toBe("Greetings"));
    expect(client.getSnapshot().turns.map((turn) => [turn.id, turn.streaming])).toEqual([
      ["turn-u1", false],
      ["turn-a2", true],
    ]);
    stream.push(r.done("Hello"));
    await sent;
    client.reset();
    expect(client.getSnapshot().title).toBeNull();
  });

  it("shows the title the server gave the conversation it started, which no frame announced", async () => {
    const { client, log } = setup(conversationScript({ autoTitle: true }));
    await client.send("hello   there");
    expect(client.getSnapshot().title).toBe("hello there");
    expect(log.transcripts).toHaveLength(1); // once the run was over
    await client.send("again");
    await client.regenerate();
    expect(client.getSnapshot().title).toBe("hello there");
    expect(log.transcripts).toHaveLength(2); // the regeneration's: no more for the title
  });

  it("asks a server that names no conversation for its title once", async () => {
    const { client, log } = setup(conversationScript());
    await client.send("one");
    await client.send("two");
    expect(client.getSnapshot().title).toBeNull();
    expect(log.transcripts).toHaveLength(1);
  });

  it("after a clear made elsewhere, a send is refused and shows what the server kept; sent again, it shows its new title", async () => {
    const { client, log, fetch } = setup(conversationScript({ autoTitle: true }));
    await client.send("one");
    await client.send("two");
    const contextId = client.getSnapshot().contextId!;
    expect(client.getSnapshot().title).toBe("one");
    // Another tab clears the conversation: its title, taken from a message, goes too.
    await fetch(`http://server.test/agents/demo/contexts/${contextId}/clear`, { method: "POST" });
    expect(log.clears).toEqual([contextId]);
    // The turn it follows is gone: the view loads what the server kept.
    expect((await rejection(client.send("three"))).code).toBe("branch_moved");
    expect(client.getSnapshot()).toMatchObject({ contextId, turns: [], title: null, status: "error" });
    await client.send("three");
    expect(log.runs.at(-1)).not.toHaveProperty("afterTurnId");
    expect(shown(client.getSnapshot())).toEqual([
      ["user", "three", "1/1"],
      ["assistant", "You said “three”.", "1/1"],
    ]);
    expect(client.getSnapshot()).toMatchObject({ contextId, title: "three", status: "idle" });
  });

  it("takes a run that names no turn it follows (an older server) as following the view's last", async () => {
    const script = olderServer(conversationScript({ autoTitle: true }), "afterTurnId");
    const { client, log } = setup(script);
    await client.send("one");
    await client.send("two");
    const loads = log.transcripts.length;
    await client.send("three");
    expect(log.transcripts).toHaveLength(loads);
    expect(client.getSnapshot().turns.filter((turn) => turn.role === "user").map((turn) => turn.text)).toEqual(["one", "two", "three"]);
  });

  it("names no turn it follows when the view's last turn has no id of the server's (an older server)", async () => {
    const base = conversationScript({ answer }); // names the conversation: no transcript is loaded for a title
    const unnamed = (frame: Frame): Frame => {
      if (frame.type !== "run_start") return frame;
      const { turnId: _, userTurnId: __, afterTurnId: ___, ...older } = frame;
      return older as Frame;
    };
    const script: Script = {
      ...base,
      run: (body) => {
        const reply = base.run(body);
        return "frames" in reply ? { frames: [...(reply.frames as Frame[])].map(unnamed) } : reply;
      },
    };
    const { client, log } = setup(script);
    await client.send("one");
    expect(client.getSnapshot().turns.map((turn) => turn.id)).not.toContainEqual(expect.stringMatching(/^turn-/));
    await client.send("two");
    expect(log.runs[1]).toMatchObject({ message: { text: "two" } });
    expect(log.runs[1]).not.toHaveProperty("afterTurnId");
  });

  it("regenerates the last reply on a new branch, then shows the server's sibling counts", async () => {
    const { client, log } = setup();
    await client.send("alpha beta");
    const [user, reply] = client.getSnapshot().turns;
    const regenerated = client.regenerate();
    // The previous reply left the view; the exchange is the newest of two.
    expect(client.getSnapshot().status).toBe("streaming");
    expect(shown(client.getSnapshot())).toEqual([
      ["user", "alpha beta", "2/2"],
      ["assistant", "", "2/2"],
    ]);
    const result = await regenerated;
    expect(result).toMatchObject({ text: reply!.text, stopReason: "end", contextId: client.getSnapshot().contextId });
    const after = client.getSnapshot();
    expect(shown(after)).toEqual([
      ["user", "alpha beta", "2/2"],
      ["assistant", reply!.text, "2/2"],
    ]);
    expect(after.status).toBe("idle");
    expect(after.turns[1]!.id).not.toBe(reply!.id);
    expect(after.turns[1]!.meta.finishedAt).toEqual(expect.any(Number)); // from the transcript
    expect(log.regenerations).toEqual([{ contextId: after.contextId, messageId: expect.stringMatching(MESSAGE_ID), turnId: reply!.id }]);
    expect(log.runs).toHaveLength(1);

    // The old reply is a sibling: switch back to it.
    await client.switchBranch(after.turns[1]!.id, 0);
    expect(client.getSnapshot().turns.map((turn) => turn.id)).toEqual([user!.id, reply!.id]);
    expect(shown(client.getSnapshot())[1]).toEqual(["assistant", reply!.text, "1/2"]);
    expect(log.branches).toEqual([{ contextId: after.contextId, turnId: after.turns[1]!.id, index: 0 }]);
  });

  it("shows no run's thinking or activity after a branch switch, as after open(): each reply keeps its own", async () => {
    const { client } = setup();
    await client.send("alpha beta");
    await client.regenerate();
    const ran = { thinking: "Counting words.", activity: [{ callId: "call-1", name: "count_words", state: "ok" }] };
    expect(client.getSnapshot()).toMatchObject(ran);
    await client.switchBranch(client.getSnapshot().turns[1]!.id, 0);
    expect(client.getSnapshot()).toMatchObject({ thinking: "", activity: [] });
    expect(client.getSnapshot().turns[1]).toMatchObject(ran);
  });

  it("takes the server's title with every transcript it loads again: a rename made elsewhere", async () => {
    const { client, script, log } = setup(conversationScript({ autoTitle: true }));
    await client.send("one");
    const contextId = client.getSnapshot().contextId!;
    script.rename!(contextId, { title: "Renamed elsewhere" });
    await client.send("two");
    expect(client.getSnapshot().title).toBe("one"); // no transcript loaded: the view shows a title
    await client.regenerate();
    expect(client.getSnapshot().title).toBe("Renamed elsewhere");
    script.rename!(contextId, { title: "Renamed again" });
    await client.switchBranch(client.getSnapshot().turns[2]!.id, 0);
    expect(client.getSnapshot().title).toBe("Renamed again");
    expect(log.transcripts).toHaveLength(2); // the first send's (for the title), the regeneration's
  });

  it("edits a message on a new branch: the turns after it leave, and switching brings them back", async () => {
    const { client, log } = setup();
    await client.send("alpha one");
    await client.send("beta two");
    const original = client.getSnapshot().turns;
    const edited = client.edit(original[0]!.id, "gamma three", { data: { page: "/x" } });
    expect(shown(client.getSnapshot())).toEqual([
      ["user", "gamma three", "2/2"],
      ["assistant", "", "2/2"],
    ]);
    const result = await edited;
    expect(result.text).toBe("“gamma three”, 2 words; first: “gamma three”.");
    const after = client.getSnapshot();
    expect(shown(after)).toEqual([
      ["user", "gamma three", "2/2"],
      ["assistant", result.text, "2/2"],
    ]);
    expect(after.turns[0]!.id).not.toBe(original[0]!.id);
    expect(log.edits).toEqual([
      {
        contextId: after.contextId,
        turnId: original[0]!.id,
        message: { text: "gamma three" },
        data: { page: "/x" },
        messageId: expect.stringMatching(MESSAGE_ID),
      },
    ]);

    await client.switchBranch(after.turns[0]!.id, 0);
    expect(client.getSnapshot().turns.map((turn) => turn.id)).toEqual(original.map((turn) => turn.id));
    expect(shown(client.getSnapshot()).map(([, , position]) => position)).toEqual(["1/2", "1/2", "1/1", "1/1"]);
    await client.switchBranch(original[1]!.id, 1);
    expect(client.getSnapshot().turns.map((turn) => turn.id)).toEqual(after.turns.map((turn) => turn.id));
  });

  /**
   * A server that holds the conversation while it handles a branch switch, as the server
   * does: from the moment `POST …/branch` arrives until its answer goes (`answerSwitch()`),
   * a send, a regeneration, an edit or another switch that arrives is refused with
   * `409 context_busy`. The hold ends as the answer goes.
   */
  function switchingServer(options: Partial<AgentClientOptions> = {}) {
    const base = conversationScript({ answer });
    const busy = { error: { status: 409, code: "context_busy", message: "The conversation is busy." } };
    /** The conversation held. */
    let held: string | null = null;
    const script: Script = {
      ...base,
      run: (body) => (body.contextId === held ? busy : base.run(body)),
      regenerate: (contextId, request) => (contextId === held ? busy : base.regenerate!(contextId, request)),
      edit: (contextId, request) => (contextId === held ? busy : base.edit!(contextId, request)),
      branch: (contextId, request, query) => {
        if (contextId === held) return busy;
        held = contextId;
        return base.branch!(contextId, request, query);
      },
    };
    const { make, log, fetch } = setup(script);
    const answers: Array<() => void> = [];
    const client = make({
      ...options,
      fetch: async (input, init) => {
        const holds = String(input).includes("/branch") && held === null;
        const response = await fetch(input, init);
        if (holds) {
          await new Promise<void>((resolve) => answers.push(resolve));
          held = null;
        }
        return response;
      },
    });
    return { client, log, answerSwitch: () => answers.shift()!() };
  }

  const toOne = "“one”, 1 words; first: “one”.";
  const meanwhile: Array<[string, (client: AgentClient) => Promise<unknown>, Array<[string, string, string]>]> = [
    ["a send", (client) => client.send("two"), [
      ["user", "one", "3/3"],
      ["assistant", toOne, "3/3"],
      ["user", "two", "1/1"],
      ["assistant", "“two”, 1 words; first: “one”.", "1/1"],
    ]],
    ["a regeneration", (client) => client.regenerate(), [
      ["user", "one", "4/4"],
      ["assistant", toOne, "4/4"],
    ]],
    ["an edit", (client) => client.edit(client.getSnapshot().turns[0]!.id, "uno"), [
      ["user", "uno", "4/4"],
      ["assistant", "“uno”, 1 words; first: “uno”.", "4/4"],
    ]],
    ["another switch", (client) => client.switchBranch(client.getSnapshot().turns[0]!.id, 1), [
      ["user", "one", "2/3"],
      ["assistant", toOne, "2/3"],
    ]],
  ];

  it.each(meanwhile)("takes %s while the server handles a branch switch, and makes its request once the switch is answered", async (name, command, after) => {
    const onError = vi.fn();
    const { client, log, answerSwitch } = switchingServer({ onError });
    await client.send("one");
    await client.regenerate();
    await client.regenerate();
    const before = client.getSnapshot();
    const switching = client.switchBranch(before.turns[0]!.id, 0);
    await vi.waitFor(() => expect(log.branches).toHaveLength(1)); // the server holds the conversation
    expect(client.getSnapshot().status).toBe("idle");
    // The status says the client is free: the command is taken, and shows what it shows at once.
    const requests = () => [log.runs, log.regenerations, log.edits, log.branches].map((requests) => requests.length);
    const made = requests();
    const making = command(client);
    if (name !== "another switch") expect(client.getSnapshot().status).toBe("streaming");
    // Time for a request made at once to reach the server (over a WebSocket too): none did.
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(requests()).toEqual(made);
    answerSwitch();
    await expect(switching).resolves.toBeUndefined();
    if (name === "another switch") {
      await vi.waitFor(() => expect(log.branches).toHaveLength(2)); // now: held in its turn
      answerSwitch();
    }
    await making;
    // The switch's answer yields to the command's view.
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(shown(client.getSnapshot())).toEqual(after);
    expect(onError).not.toHaveBeenCalled();
    expect(log.branches).toHaveLength(name === "another switch" ? 2 : 1);
  });

  it("makes no request for a switch waiting on another when a send taken since owns the view", async () => {
    const { client, log, answerSwitch } = switchingServer();
    await client.send("one");
    await client.regenerate();
    const [user] = client.getSnapshot().turns;
    const switching = client.switchBranch(user!.id, 0);
    await vi.waitFor(() => expect(log.branches).toHaveLength(1));
    const moot = client.switchBranch(user!.id, 1); // waits for the first to be answered
    const sending = client.send("two"); // and this one owns the view from now on
    answerSwitch();
    // Had the second switch gone too, it or the send would meet the other's hold.
    expect((await sending).text).toBe("“two”, 1 words; first: “one”.");
    await expect(switching).resolves.toBeUndefined();
    await expect(moot).resolves.toBeUndefined();
    expect(log.branches).toHaveLength(1);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(shown(client.getSnapshot()).map(([, text, position]) => `${text} ${position}`)).toEqual([
      "one 2/2",
      "“one”, 1 words; first: “one”. 2/2",
      "two 1/1",
      "“two”, 1 words; first: “one”. 1/1",
    ]);
  });

  it("cancels on reset() a send waiting for a switch's answer; a send in a new conversation does not wait", async () => {
    const { client, log, answerSwitch } = switchingServer();
    await client.send("one");
    await client.regenerate();
    const switching = client.switchBranch(client.getSnapshot().turns[0]!.id, 0);
    await vi.waitFor(() => expect(log.branches).toHaveLength(1));
    const sending = client.send("two");
    client.reset();
    // The fake answers the switch only when told, whatever the signal says: the send waits no more.
    expect((await rejection(sending)).code).toBe("aborted");
    expect(client.getSnapshot()).toMatchObject({ contextId: null, turns: [], status: "idle" });
    // Nor does a send in a new conversation: the switch, cancelled, is no concern of it.
    expect((await client.send("fresh")).text).toBe("“fresh”, 1 words; first: “fresh”.");
    answerSwitch();
    expect((await rejection(switching)).code).toBe("aborted");
    expect(log.runs.map((run) => run.message.text)).toEqual(["one", "fresh"]);
  });

  it("tells onFinish of a regeneration and an edit, and the pending results carry the run", async () => {
    const onFinish = vi.fn();
    const { client } = setup(undefined, { onFinish });
    await client.send("one");
    await client.regenerate();
    await client.edit(client.getSnapshot().turns[0]!.id, "two");
    expect(onFinish.mock.calls.map(([result]) => [result.text, result.stopReason])).toEqual([
      ["“one”, 1 words; first: “one”.", "end"],
      ["“one”, 1 words; first: “one”.", "end"],
      ["“two”, 1 words; first: “two”.", "end"],
    ]);
  });

  it("repeats a regeneration and an edit whose answer never started, under the same messageId", async () => {
    const base = conversationScript({ answer });
    const started = { regenerate: 0, edit: 0 };
    const script: Script = {
      ...base,
      regenerate: (contextId, request) => {
        started.regenerate += 1;
        const reply = base.regenerate!(contextId, request);
        return "frames" in reply ? { ...reply, cutAfter: 0 } : reply; // the run starts; its answer is lost
      },
      edit: (contextId, request) => {
        started.edit += 1;
        const reply = base.edit!(contextId, request);
        return "frames" in reply ? { ...reply, cutAfter: 0 } : reply;
      },
    };
    const { client, log } = setup(script);
    await client.send("one");
    await client.regenerate();
    await client.edit(client.getSnapshot().turns[0]!.id, "two");
    expect(started).toEqual({ regenerate: 1, edit: 1 });
    expect(log.regenerations).toHaveLength(2);
    expect(log.regenerations[1]!.messageId).toBe(log.regenerations[0]!.messageId);
    expect(log.edits).toHaveLength(2);
    expect(log.edits[1]!.messageId).toBe(log.edits[0]!.messageId);
    expect(shown(client.getSnapshot())).toEqual([
      ["user", "two", "3/3"],
      ["assistant", "“two”, 1 words; first: “two”.", "3/3"],
    ]);
  });

  it("refuses without a request what it can tell is wrong", async () => {
    const { client, log } = setup();
    expect((await rejection(client.regenerate())).code).toBe("nothing_to_regenerate");
    expect((await rejection(client.edit("turn-x", "hi"))).code).toBe("turn_not_found");
    expect((await rejection(client.switchBranch("turn-x", 0))).code).toBe("branch_not_found");
    await client.send("one");
    const [user, reply] = client.getSnapshot().turns;
    expect((await rejection(client.edit(reply!.id, "hi"))).code).toBe("not_a_user_turn");
    expect((await rejection(client.edit(user!.id, "  "))).code).toBe("invalid_request");
    expect((await rejection(client.edit(user!.id, "hi", { data: [] as never }))).code).toBe("invalid_request");
    expect((await rejection(client.edit("turn-unknown", "hi"))).code).toBe("turn_not_found");
    expect((await rejection(client.switchBranch(user!.id, -1))).code).toBe("invalid_request");
    expect((await rejection(client.switchBranch(user!.id, 0.5))).code).toBe("invalid_request");
    // An alternative the turn does not have: the server's refusal, made here.
    const past = await rejection(client.switchBranch(user!.id, 7));
    expect(past).toMatchObject({ code: "branch_not_found", message: "That turn has 1 alternative: index 0.", retryable: false });
    expect(past.status).toBeUndefined();
    expect(log.regenerations).toEqual([]);
    expect(log.edits).toEqual([]);
    expect(log.branches).toEqual([]);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });

    await client.regenerate();
    const [, again] = client.getSnapshot().turns;
    expect([again!.siblings, again!.siblingIndex]).toEqual([2, 1]);
    expect((await rejection(client.switchBranch(again!.id, 2))).message).toBe("That turn has 2 alternatives: index 0 to 1.");
    expect(log.branches).toEqual([]);
    await client.switchBranch(again!.id, 0); // within the count: asked of the server
    expect(log.branches).toHaveLength(1);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
  });

  it("counts a turn's alternatives as its view shows them: one another tab added is switched to once a transcript shows it", async () => {
    const { first, second, make, log } = await twoTabs();
    await first.regenerate(); // "two" now has two alternatives; the second tab still shows one
    const user = second.getSnapshot().turns[2]!;
    expect(user.siblings).toBe(1);
    expect((await rejection(second.switchBranch(user.id, 1))).code).toBe("branch_not_found");
    expect(log.branches).toEqual([]);
    second.dispose();
    const reloaded = make({ contextId: first.getSnapshot().contextId });
    await reloaded.start();
    const [, , shownAgain] = reloaded.getSnapshot().turns;
    expect(shownAgain!.siblings).toBe(2);
    await reloaded.switchBranch(shownAgain!.id, 0);
    expect(shown(reloaded.getSnapshot()).slice(2)).toEqual([
      ["user", "two", "1/2"],
      ["assistant", "“two”, 1 words; first: “one”.", "1/2"],
    ]);
  });

  it("brings the turns back when the server refuses, and shows the typed error", async () => {
    const base = conversationScript({ answer });
    // (A context_busy loads the transcript too: see agent-client-elsewhere.test.ts.)
    const limited = { error: { status: 429, code: "rate_limited", message: "Slow down." } };
    let refuseSwitch = true;
    const script: Script = {
      ...base,
      regenerate: () => limited,
      edit: () => ({ error: { status: 404, code: "turn_not_found", message: "Not on this branch." } }),
      // A switch within the turn's count, which the server refuses (the conversation was cleared elsewhere, say).
      branch: (contextId, request, query) =>
        refuseSwitch ? { error: { status: 404, code: "turn_not_found", message: "Cleared." } } : base.branch!(contextId, request, query),
    };
    const reported: string[] = [];
    const { client } = setup(script, { onError: (error) => reported.push(error.code) });
    await client.send("one");
    await client.send("two");
    const before = client.getSnapshot().turns;

    const regenerating = await rejection(client.regenerate());
    expect(regenerating).toMatchObject({ code: "rate_limited", retryable: true });
    expect(client.getSnapshot().turns).toEqual(before);
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "rate_limited" } });

    const editing = await rejection(client.edit(before[0]!.id, "zero"));
    expect(editing.code).toBe("turn_not_found");
    expect(client.getSnapshot().turns).toEqual(before);
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "turn_not_found" } });

    const switching = await rejection(client.switchBranch(before[0]!.id, 0));
    expect(switching).toMatchObject({ code: "turn_not_found", status: 404 });
    expect(client.getSnapshot().turns).toEqual(before);
    expect(client.getSnapshot()).toMatchObject({ status: "error", error: { code: "turn_not_found" } });
    expect(reported).toEqual(["rate_limited", "turn_not_found", "turn_not_found"]);

    // A success clears the error.
    refuseSwitch = false;
    await client.switchBranch(before[0]!.id, 0);
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
  });

  it("guards regenerate, edit and switchBranch like send: busy, decision pending, disposed", async () => {
    const stream = channel();
    const base = conversationScript({ answer });
    let asking = false;
    // The runs made here by hand follow the last turn shown, as the server's would: the view is not behind.
    let last: string | null = null;
    const script: Script = {
      ...base,
      run: (body) => {
        if (body.message.text === "slow") return { frames: stream.frames() };
        if (!asking) return base.run(body);
        const r = runFrames(body.contextId!, "run-ask", 100);
        return { frames: [r.start({ afterTurnId: last }), r.interrupt(refund), r.done("", [], "interrupted")] };
      },
    };
    const { client, log } = setup(script);
    await client.send("one");
    const { contextId, turns } = client.getSnapshot();
    const [user] = turns;

    const slow = client.send("slow");
    expect((await rejection(client.regenerate())).code).toBe("context_busy");
    expect((await rejection(client.edit(user!.id, "x"))).code).toBe("context_busy");
    expect((await rejection(client.switchBranch(user!.id, 0))).code).toBe("context_busy");
    const r = runFrames(contextId!, "run-slow", 50);
    stream.push(r.start({ afterTurnId: turns.at(-1)!.id }));
    stream.push(r.done("done"));
    await slow;

    asking = true;
    last = client.getSnapshot().turns.at(-1)!.id;
    await client.send("refund please");
    expect(client.getSnapshot().interrupt).toEqual(refund);
    for (const attempt of [client.regenerate(), client.edit(user!.id, "x"), client.switchBranch(user!.id, 0)]) {
      expect(await rejection(attempt)).toMatchObject({ code: "decision_pending", interruptId: "int-1" });
    }
    expect(log.regenerations).toEqual([]);
    expect(log.edits).toEqual([]);
    expect(log.branches).toEqual([]);

    client.dispose();
    for (const attempt of [client.regenerate(), client.edit(user!.id, "x"), client.switchBranch(user!.id, 0)]) {
      expect((await rejection(attempt)).code).toBe("disposed");
    }
  });

  it("shows the question another tab's run asked when a branch switch is refused for it, as a send does", async () => {
    const base = conversationScript({ answer });
    let pending = false;
    const script: Script = {
      ...base,
      transcript: (contextId, query) => {
        const shown = base.transcript!(contextId, query);
        return pending && shown && !("error" in shown) ? { ...shown, pendingInterrupt: refund } : shown;
      },
      branch: (contextId, request, query) =>
        pending
          ? { error: { status: 409, code: "decision_pending", message: "Answer the pending decision first." } }
          : base.branch!(contextId, request, query),
    };
    const { client } = setup(script);
    await client.send("one");
    const [user] = client.getSnapshot().turns;
    pending = true; // another tab's run asks a question
    const refused = await rejection(client.switchBranch(user!.id, 0));
    expect(refused).toMatchObject({ code: "decision_pending", interruptId: "int-1" });
    expect(client.getSnapshot().interrupt).toEqual(refund);
  });

  it("numbers a reply it follows, not started, as its exchange: a regeneration found on load, then a decision", async () => {
    // A reload while a regeneration streams: the exchange is the second of two, its reply not written yet.
    const contextId = "ctx-" + "0".repeat(35) + "1";
    const numbers = { siblings: 2, siblingIndex: 1 };
    const user = transcriptTurn("user", "Refund please", { id: "turn-000100000000-u0", ...numbers });
    const regenerating = runFrames(contextId, "run-2", 10);
    const continued = runFrames(contextId, "run-3", 20);
    const script: Script = {
      run: () => ({ error: { status: 400, code: "invalid_request", message: "Not here." } }),
      transcript: () => ({ contextId, agent: "demo", title: "Refund please", turns: [user], activeRunId: "run-2", pendingInterrupt: null, hasEarlier: false }),
      attach: () => ({
        frames: [
          regenerating.start({ turnId: "turn-000100000000-a0", userTurnId: user.id, afterTurnId: null }),
          regenerating.interrupt(refund),
          regenerating.done("Let me ask.", [], "interrupted"),
        ],
      }),
      decide: () => ({
        frames: [
          continued.start({ turnId: "turn-000100000000-a1", userTurnId: null, afterTurnId: "turn-000100000000-a0" }),
          continued.done("Refunded."),
        ],
      }),
    };
    const { make } = setup(script);
    const client = make({ contextId });
    await client.start();
    await vi.waitFor(() => expect(client.getSnapshot().interrupt).toEqual(refund));
    expect(shown(client.getSnapshot())).toEqual([
      ["user", "Refund please", "2/2"],
      ["assistant", "Let me ask.", "2/2"],
    ]);
    await client.decide("approve");
    expect(shown(client.getSnapshot())).toEqual([
      ["user", "Refund please", "2/2"],
      ["assistant", "Let me ask.", "2/2"],
      ["assistant", "Refunded.", "2/2"],
    ]);
  });

  it("opens another conversation, and forgets one the server does not know", async () => {
    const onContext = vi.fn();
    const { client, make } = setup(undefined, { onContext });
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    client.reset();
    await client.send("second");
    const second = client.getSnapshot().contextId!;

    await client.open(first);
    expect(client.getSnapshot()).toMatchObject({ contextId: first, status: "idle", title: "About first" });
    expect(client.getSnapshot().turns.map((turn) => turn.text)[0]).toBe("first");
    await client.open(first); // the one shown: nothing happens
    await client.open("ctx-" + "f".repeat(36));
    expect(client.getSnapshot()).toMatchObject({ contextId: null, turns: [] });
    expect(onContext.mock.calls.map(([id]) => id)).toEqual([first, null, second, first, "ctx-" + "f".repeat(36), null]);

    // Another client of the same user opens it as well.
    const other = make({ onContext: undefined });
    await other.open(second);
    expect(other.getSnapshot().turns.map((turn) => turn.text)[0]).toBe("second");
  });

  it("forgets a malformed id it is asked to open, without a request", async () => {
    const onContext = vi.fn();
    const { client, log } = setup(undefined, { onContext });
    await client.send("first");
    const first = client.getSnapshot().contextId!;
    const loads = log.transcripts.length;
    await client.open("ctx-2f77…");
    expect(client.getSnapshot()).toMatchObject({ contextId: null, status: "idle", error: null, turns: [] });
    expect(log.transcripts).toHaveLength(loads);
    expect(onContext.mock.calls.map(([id]) => id)).toEqual([first, null]);
    await client.send("second");
    expect(client.getSnapshot()).toMatchObject({ status: "idle", error: null });
    expect(log.runs.at(-1)!.contextId).toBeUndefined();
  });

  describe("with earlier pages loaded", () => {
    /** The user messages shown, and whether exchanges precede them. */
    const messages = (snapshot: Snapshot) => ({
      users: snapshot.turns.filter((turn) => turn.role === "user").map((turn) => turn.text),
      hasEarlier: snapshot.hasEarlier,
    });

    /** A client showing `writer`'s conversation two exchanges a page, every page loaded. */
    async function reader(writer: AgentClient, make: (more?: Partial<AgentClientOptions>) => AgentClient) {
      const client = make({ contextId: writer.getSnapshot().contextId, pageSize: 2 });
      await client.start();
      expect(client.getSnapshot().hasEarlier).toBe(true);
      while (client.getSnapshot().hasEarlier) await client.loadEarlier();
      return client;
    }

    it("keeps them when the reload after a regeneration begins at a turn shown", async () => {
      const { client: writer, make } = setup();
      for (const text of ["one", "two", "three", "four"]) await writer.send(text);
      const client = await reader(writer, make);
      const before = client.getSnapshot().turns;

      await client.regenerate(); // reloads the last page: "three", then the new "four"
      const after = client.getSnapshot();
      expect(messages(after)).toEqual({ users: ["one", "two", "three", "four"], hasEarlier: false });
      expect(after.turns.slice(0, 6)).toEqual(before.slice(0, 6));
      expect(shown(after).at(-1)).toEqual(["assistant", before[7]!.text, "2/2"]);
    });

    it("keeps them when the branch switched to goes on from a turn shown", async () => {
      const { client: writer, make } = setup();
      for (const text of ["one", "two", "three", "four"]) await writer.send(text);
      await writer.regenerate();
      const client = await reader(writer, make);
      const before = client.getSnapshot().turns;

      await client.switchBranch(before[7]!.id, 0);
      const after = client.getSnapshot();
      expect(messages(after)).toEqual({ users: ["one", "two", "three", "four"], hasEarlier: false });
      expect(after.turns.slice(0, 6)).toEqual(before.slice(0, 6));
      expect(shown(after).slice(-2).map(([, , position]) => position)).toEqual(["1/2", "1/2"]);
    });

    it("shows the page alone when it begins at no turn shown, then reads along its branch", async () => {
      const { client: writer, make } = setup();
      for (const text of ["one", "two", "three"]) await writer.send(text);
      await writer.edit(writer.getSnapshot().turns[0]!.id, "uno");
      for (const text of ["dos", "tres"]) await writer.send(text);
      const client = await reader(writer, make);
      expect(messages(client.getSnapshot())).toEqual({ users: ["uno", "dos", "tres"], hasEarlier: false });

      await client.switchBranch(client.getSnapshot().turns[0]!.id, 0);
      expect(messages(client.getSnapshot())).toEqual({ users: ["two", "three"], hasEarlier: true });
      await client.loadEarlier();
      expect(messages(client.getSnapshot())).toEqual({ users: ["one", "two", "three"], hasEarlier: false });
    });
  });
});

describe("AgentClient.open during a run", () => {
  it("aborts the send in flight, as reset does, and shows the other conversation", async () => {
    const stream = channel();
    const script = conversationScript();
    const log = newLog();
    const fetch = fakeFetch(
      { ...script, run: (body) => (body.message.text === "slow" ? { frames: stream.frames() } : script.run(body)) },
      log,
    );
    const client = new AgentClient({ agent: "demo", fetch });
    await client.send("kept");
    const kept = client.getSnapshot().contextId!;
    client.reset();
    const sent = client.send("slow");
    stream.push(runFrames("ctx-slow", "run-1").start());
    await vi.waitFor(() => expect(client.getSnapshot().contextId).toBe("ctx-slow"));
    const opened = client.open(kept);
    expect((await rejection(sent)).code).toBe("aborted");
    await opened;
    expect(client.getSnapshot()).toMatchObject({ contextId: kept, status: "idle" });
    expect(client.getSnapshot().turns.map((turn) => turn.text)).toEqual(["kept", "You said “kept”."]);
  });
});
