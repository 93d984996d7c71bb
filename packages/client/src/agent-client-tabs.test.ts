/**
 * Tabs on one `tabChannel` (one user's, on one origin): a run one starts is
 * followed by another that shows the conversation, and their lists keep in
 * step — told over a BroadcastChannel, by ids only.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { AgentClient } from "./agent-client.js";
import { ConversationList } from "./conversation-list.js";
import { conversationScript, newLog, type ServerLog } from "./testing/index.js";
import { wires } from "./test-helpers.js";

const texts = (client: AgentClient) => client.getSnapshot().turns.map((turn) => turn.text);

let channels = 0;
const opened: Array<{ dispose(): void }> = [];
afterEach(() => {
  for (const item of opened.splice(0)) item.dispose();
});

describe.each(wires)("tabs on one channel over %s", (_name, wire) => {
  /** A server whose replies wait for `release()`, and tabs of it: each its own wire and log, one channel. */
  function setup() {
    let release = () => {};
    const script = conversationScript({
      answer: (text) => {
        if (!text.startsWith("slow")) return `Re: ${text}`;
        return { text: `Re: ${text}`, until: new Promise<void>((resolve) => (release = resolve)) };
      },
    });
    channels += 1;
    const channel = `tabs-${channels}`;
    const news: unknown[] = [];
    const spy = new BroadcastChannel(channel);
    spy.onmessage = (event) => news.push(event.data);
    opened.push({ dispose: () => spy.close() });
    function tab(options: { contextId?: string | null; tabChannel?: string } = {}) {
      const log = newLog();
      const { transport, fetch } = wire(script, log);
      const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", transport, fetch, tabChannel: channel, ...options });
      const list = new ConversationList({ agent: "demo", baseUrl: "http://server.test", fetch, client });
      opened.push(list, client);
      return { client, list, log };
    }
    return { tab, news, release: () => release(), channel };
  }

  it("follows a run another tab starts in the conversation shown, to the same turns", async () => {
    const { tab, news, release } = setup();
    const a = tab();
    await a.client.send("one");
    const contextId = a.client.getSnapshot().contextId!;
    const b = tab({ contextId });
    await b.client.start();
    expect(texts(b.client)).toEqual(["one", "Re: one"]);

    const sent = a.client.send("slow two");
    // B loads the transcript, finds the run, and follows it as a reload would.
    await vi.waitFor(() => expect(b.client.getSnapshot()).toMatchObject({ status: "streaming" }));
    expect(b.log.transcripts).toHaveLength(2);
    expect(texts(b.client).slice(0, 3)).toEqual(["one", "Re: one", "slow two"]);
    release();
    await sent;
    await vi.waitFor(() => expect(b.client.getSnapshot().status).toBe("idle"));
    expect(texts(b.client)).toEqual(texts(a.client));
    expect(texts(b.client)).toEqual(["one", "Re: one", "slow two", "Re: slow two"]);
    // It read the run it followed: the end told changes nothing more.
    await vi.waitFor(() => expect(news.filter((item) => (item as { run?: string }).run === "ended")).toHaveLength(2));
    expect(b.log.transcripts).toHaveLength(2);
    // What went over the channel: ids only.
    for (const item of news) expect(Object.keys(item as object).sort()).toEqual(["contextId", "run", "runId"]);

    // And B's next send goes at the first try.
    await b.client.send("three");
    expect(b.log.runs).toHaveLength(1);
  });

  it("tells a tab on another channel (another user's) nothing", async () => {
    const { tab, release } = setup();
    const a = tab();
    await a.client.send("one");
    const contextId = a.client.getSnapshot().contextId!;
    const b = tab({ contextId });
    await b.client.start();
    // A tab on another channel (another user's, say) hears nothing.
    const other = tab({ contextId, tabChannel: "someone-else" });
    await other.client.start();
    const sent = a.client.send("slow two");
    await vi.waitFor(() => expect(b.client.getSnapshot().status).toBe("streaming"));
    release();
    await sent;
    await vi.waitFor(() => expect(texts(b.client)).toEqual(texts(a.client)));
    expect(other.log.transcripts).toHaveLength(1);
    expect(texts(other.client)).toEqual(["one", "Re: one"]);
  });

  it("keeps the lists of other tabs in step: a new conversation, a rename, a forget, a branch shown", async () => {
    const { tab } = setup();
    const a = tab();
    const b = tab();
    await Promise.all([a.list.start(), b.list.start()]);
    const settled = async (log: ServerLog, count: number, list: ConversationList) => {
      await vi.waitFor(() => expect(log.listings).toHaveLength(count));
      await vi.waitFor(() => expect(list.getSnapshot().loading).toBe(false));
    };

    await a.client.send("one");
    const contextId = a.client.getSnapshot().contextId!;
    await settled(b.log, 2, b.list);
    expect(b.list.getSnapshot().conversations).toMatchObject([{ contextId, preview: "Re: one" }]);

    await a.list.rename(contextId, "Named in A");
    await settled(b.log, 3, b.list);
    expect(b.list.getSnapshot().conversations).toMatchObject([{ contextId, title: "Named in A" }]);

    await a.client.send("two");
    await a.client.edit(a.client.getSnapshot().turns[0]!.id, "ONE edited");
    await settled(b.log, 5, b.list);
    expect(b.list.getSnapshot().conversations).toMatchObject([{ preview: "Re: ONE edited", turnCount: 2 }]);
    await a.client.switchBranch(a.client.getSnapshot().turns[0]!.id, 0);
    await settled(b.log, 6, b.list);
    expect(b.list.getSnapshot().conversations).toMatchObject([{ preview: "Re: two", turnCount: 4 }]);

    await a.list.remove(contextId);
    await settled(b.log, 7, b.list);
    expect(b.list.getSnapshot().conversations).toEqual([]);
  });
});
