/**
 * useConversations with useAgent under one AgentProvider, over both transports:
 * a sidebar and a chat share the selected conversation; the list refreshes
 * after runs; persist stores the selected id and nothing else. Branches from
 * the chat, with React keys that survive the transcript replacing the stream.
 */
import { act, cleanup, fireEvent, render, renderHook, screen, waitFor, within } from "@testing-library/react";
import { AgentClient } from "@thinwire/client";
import { conversationScript, fakeFetch, fakeWebSocket, newLog, type Script } from "@thinwire/client/testing";
import { StrictMode, useEffect } from "react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AgentProvider } from "./agent-provider.js";
import { useAgent } from "./use-agent.js";
import { useConversations } from "./use-conversations.js";

function server(script: Script = conversationScript({ answer: (text) => ({ text: `Re: ${text}`, title: `On ${text}` }) })) {
  const log = newLog();
  return { log, script, fetch: fakeFetch(script, log), ...fakeWebSocket(script, log) };
}

function storageContents(): Record<string, string> {
  const out: Record<string, string> = {};
  for (let index = 0; index < localStorage.length; index++) {
    const key = localStorage.key(index)!;
    out[key] = localStorage.getItem(key)!;
  }
  return out;
}

function Sidebar() {
  const { conversations, selected, select, create, rename, remove, hasMore, loadMore } = useConversations();
  return (
    <aside>
      <button onClick={create}>New</button>
      {conversations.map((item) => (
        <div key={item.contextId} data-testid="item" data-selected={String(item.contextId === selected)}>
          <button onClick={() => void select(item.contextId)}>{item.title ?? item.preview}</button>
          <button onClick={() => void rename(item.contextId, `Renamed ${item.preview}`).catch(() => undefined)}>rename</button>
          <button onClick={() => void remove(item.contextId).catch(() => undefined)}>forget</button>
        </div>
      ))}
      {hasMore && <button onClick={() => void loadMore()}>More</button>}
    </aside>
  );
}

/** Counts how often each turn id mounted: a key that changes remounts. */
const mounts = new Map<string, number>();

function TurnRow({ id, text }: { id: string; text: string }) {
  useEffect(() => {
    mounts.set(id, (mounts.get(id) ?? 0) + 1);
  }, [id]);
  return <p data-testid="turn">{text}</p>;
}

function Chat() {
  const { turns, title, status, send, regenerate } = useAgent();
  const busy = status === "streaming" || status === "reconnecting";
  return (
    <main>
      <h1 data-testid="title">{title ?? "untitled"}</h1>
      <p data-testid="status">{status}</p>
      {turns.map((turn) => (
        <TurnRow key={turn.id} id={turn.id} text={`${turn.text} ${turn.siblingIndex + 1}/${turn.siblings}`} />
      ))}
      <button disabled={busy} onClick={() => void send(`message ${turns.length / 2 + 1}`).catch(() => undefined)}>
        Send
      </button>
      <button disabled={busy} onClick={() => void regenerate().catch(() => undefined)}>
        Regenerate
      </button>
    </main>
  );
}

const texts = () => screen.queryAllByTestId("turn").map((turn) => turn.textContent);
const items = () => screen.queryAllByTestId("item").map((item) => [within(item).getAllByRole("button")[0]!.textContent, item.dataset.selected]);

beforeEach(() => {
  localStorage.clear();
  mounts.clear();
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  localStorage.clear();
});

describe.each(["sse", "websocket"] as const)("useConversations with useAgent under one AgentProvider over %s", (transport) => {
  it("shares the selection: select, create, rename, forget — and persist keeps only the selected id", async () => {
    const { fetch, WebSocket, log } = server();
    vi.stubGlobal("WebSocket", WebSocket);
    render(
      <StrictMode>
        <AgentProvider agent="demo" baseUrl="http://server.test" transport={transport} fetch={fetch} persist={{ userId: "ada" }}>
          <Sidebar />
          <Chat />
        </AgentProvider>
      </StrictMode>,
    );
    const key = "thinwire:demo:ada:contextId";
    await waitFor(() => expect(log.listings.length).toBeGreaterThan(0));
    expect(items()).toEqual([]);

    // A run the chat finishes refreshes the list, which selects the chat's conversation.
    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(items()).toEqual([["On message 1", "true"]]));
    const first = localStorage.getItem(key)!;
    expect(screen.getByTestId("title").textContent).toBe("On message 1");

    fireEvent.click(screen.getByText("New"));
    expect(texts()).toEqual([]);
    expect(storageContents()).toEqual({});
    fireEvent.click(screen.getByText("Send"));
    // The new conversation is the most recently active, and the selected one.
    await waitFor(() => expect(items()).toEqual([["On message 1", "true"], ["On message 1", "false"]]));
    const second = localStorage.getItem(key)!;
    expect(second).not.toBe(first);

    // Select the first: the chat shows it, storage holds its id and nothing else.
    fireEvent.click(within(screen.getAllByTestId("item")[1]!).getAllByRole("button")[0]!);
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("idle"));
    await waitFor(() => expect(texts()).toEqual(["message 1 1/1", "Re: message 1 1/1"]));
    expect(storageContents()).toEqual({ [key]: first });
    expect(screen.getAllByTestId("item").map((item) => item.dataset.selected)).toEqual(["false", "true"]);

    // A rename shows in the sidebar and in the chat's title.
    fireEvent.click(within(screen.getAllByTestId("item")[1]!).getByText("rename"));
    await waitFor(() => expect(screen.getByTestId("title").textContent).toBe("Renamed Re: message 1"));
    expect(items()[1]).toEqual(["Renamed Re: message 1", "true"]);

    // Forgetting the selected conversation starts a new one.
    fireEvent.click(within(screen.getAllByTestId("item")[1]!).getByText("forget"));
    await waitFor(() => expect(items()).toEqual([["On message 1", "false"]]));
    expect(texts()).toEqual([]);
    expect(storageContents()).toEqual({});
    expect(log.forgets).toEqual([first]);
  });

  it("drops a row deleted elsewhere once selecting it finds it gone", async () => {
    const { fetch, WebSocket } = server();
    vi.stubGlobal("WebSocket", WebSocket);
    render(
      <AgentProvider agent="demo" baseUrl="http://server.test" transport={transport} fetch={fetch} persist={{ userId: "ada" }}>
        <Sidebar />
        <Chat />
      </AgentProvider>,
    );
    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(items()).toEqual([["On message 1", "true"]]));
    const first = localStorage.getItem("thinwire:demo:ada:contextId")!;
    fireEvent.click(screen.getByText("New"));
    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(items()).toEqual([["On message 1", "true"], ["On message 1", "false"]]));
    const second = localStorage.getItem("thinwire:demo:ada:contextId")!;
    // Another tab deletes the first conversation; this sidebar still lists it.
    expect((await fetch(`http://server.test/agents/demo/contexts/${first}`, { method: "DELETE" })).status).toBe(204);

    fireEvent.click(within(screen.getAllByTestId("item")[1]!).getAllByRole("button")[0]!);
    // Forgotten quietly, as a load forgets an id the server does not know: a new conversation, the row gone.
    await waitFor(() => expect(items()).toEqual([["On message 1", "false"]]));
    expect(texts()).toEqual([]);
    expect(storageContents()).toEqual({});
    expect(second).not.toBe(first);
  });
});

describe("the chat's branches", () => {
  it("keeps the React keys of turns across the transcript that follows a regeneration", async () => {
    const { fetch } = server();
    render(
      <AgentProvider agent="demo" baseUrl="http://server.test" fetch={fetch}>
        <Chat />
      </AgentProvider>,
    );
    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(texts()).toEqual(["message 1 1/1", "Re: message 1 1/1"]));
    fireEvent.click(screen.getByText("Send"));
    await waitFor(() => expect(texts()).toHaveLength(4));
    await waitFor(() => expect(screen.getByTestId("status").textContent).toBe("idle"));
    const serverIds = () => [...mounts.keys()].filter((id) => id.startsWith("turn-"));
    const before = serverIds();
    expect(before).toHaveLength(4);

    fireEvent.click(screen.getByText("Regenerate"));
    await waitFor(() => expect(texts()).toEqual(["message 1 1/1", "Re: message 1 1/1", "message 2 2/2", "Re: message 2 2/2"]));
    // The first exchange was shown from the stream, then from the transcript: mounted once.
    expect(before.slice(0, 2).map((id) => mounts.get(id))).toEqual([1, 1]);
    // Every turn that came with a server id mounted once.
    expect(serverIds().every((id) => mounts.get(id) === 1)).toBe(true);
  });
});

describe("useAgent's branch commands", () => {
  it("edits a message and switches back to the branch it left", async () => {
    const { fetch, log } = server();
    const { result } = renderHook(() => useAgent({ agent: "demo", fetch }));
    await act(() => result.current.send("one"));
    await act(() => result.current.send("two"));
    const original = result.current.turns.map((turn) => turn.id);
    await act(() => result.current.edit(original[2]!, "deux"));
    expect(result.current.turns.map((turn) => [turn.text, turn.siblingIndex, turn.siblings])).toEqual([
      ["one", 0, 1],
      ["Re: one", 0, 1],
      ["deux", 1, 2],
      ["Re: deux", 1, 2],
    ]);
    expect(result.current.title).toBe("On one");
    await act(() => result.current.switchBranch(result.current.turns[2]!.id, 0));
    expect(result.current.turns.map((turn) => turn.id)).toEqual(original);
    expect(log.edits).toHaveLength(1);
    expect(log.branches).toHaveLength(1);
  });
});

describe("useConversations", () => {
  it("shares a client you made, or keeps a selection of its own with client: null", async () => {
    const { fetch, log } = server();
    const client = new AgentClient({ agent: "demo", fetch });
    await client.send("hello");
    const { result } = renderHook(() => useConversations({ agent: "demo", fetch, client, pageSize: 5 }));
    await waitFor(() => expect(result.current.conversations).toHaveLength(1));
    expect(result.current.selected).toBe(client.getSnapshot().contextId);
    act(() => result.current.create());
    expect(client.getSnapshot().contextId).toBeNull();
    expect(result.current.selected).toBeNull();
    expect(log.listings[0]).toEqual({ limit: 5, cursor: null });

    const own = renderHook(() => useConversations({ agent: "demo", fetch, client: null }));
    await waitFor(() => expect(own.result.current.conversations).toHaveLength(1));
    const id = own.result.current.conversations[0]!.contextId;
    await act(() => own.result.current.select(id));
    expect(own.result.current.selected).toBe(id);
    expect(client.getSnapshot().contextId).toBeNull();
    client.dispose();
  });

  it("pages with the provider's agent, and reads its headers at each request", async () => {
    const { fetch } = server();
    const seed = new AgentClient({ agent: "demo", fetch });
    for (let index = 0; index < 3; index++) {
      seed.reset();
      await seed.send(`seed ${index}`);
    }
    const headers: Array<string | null> = [];
    const spy: typeof globalThis.fetch = (input, init) => {
      headers.push(new Headers(init?.headers).get("authorization"));
      return fetch(input, init);
    };
    let token = "one";
    const { result, rerender } = renderHook(() => useConversations(), {
      wrapper: ({ children }) => (
        <AgentProvider agent="demo" fetch={spy} headers={{ authorization: `Bearer ${token}` }}>
          {children}
        </AgentProvider>
      ),
    });
    await waitFor(() => expect(result.current.conversations).toHaveLength(3));
    expect(result.current.hasMore).toBe(false);
    await act(() => result.current.loadMore()); // nothing more: no request
    token = "two";
    rerender();
    await act(() => result.current.refresh());
    expect(headers).toEqual(["Bearer one", "Bearer two"]);
    seed.dispose();
  });

  it("shows in the chat's title a rename made elsewhere, once a refresh lists it", async () => {
    const { fetch, script } = server();
    const { result } = renderHook(() => ({ chat: useAgent(), list: useConversations() }), {
      wrapper: ({ children }) => (
        <AgentProvider agent="demo" fetch={fetch}>
          {children}
        </AgentProvider>
      ),
    });
    await act(() => result.current.chat.send("hello"));
    expect(result.current.chat.title).toBe("On hello");
    await waitFor(() => expect(result.current.list).toMatchObject({ loading: false, conversations: [{ title: "On hello" }] }));
    script.rename!(result.current.chat.contextRef.current!, { title: "Renamed in another tab" });
    await act(() => result.current.list.refresh());
    expect(result.current.chat.title).toBe("Renamed in another tab");
    expect(result.current.list.conversations[0]!.title).toBe("Renamed in another tab");
  });

  it("needs options outside an AgentProvider made from options", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    expect(() => renderHook(() => useConversations())).toThrow(/AgentProvider/);
  });
});

describe("tabs of one user, under persist", () => {
  afterEach(() => cleanup());

  it("follow each other's runs and keep their lists in step; another user's tab hears nothing", async () => {
    let release = () => {};
    const script = conversationScript({
      answer: (text) =>
        text.startsWith("slow") ? { text: `Re: ${text}`, until: new Promise<void>((resolve) => (release = resolve)) } : `Re: ${text}`,
    });
    function tab(userId: string, contextId?: string) {
      const log = newLog();
      const fetch = fakeFetch(script, log);
      const hook = renderHook(() => ({ agent: useAgent(), list: useConversations() }), {
        wrapper: ({ children }) => (
          <AgentProvider agent="demo" fetch={fetch} persist={{ userId }} contextId={contextId}>
            {children}
          </AgentProvider>
        ),
      });
      return { log, result: hook.result };
    }
    const texts = (result: { current: { agent: { turns: readonly { text: string }[] } } }) =>
      result.current.agent.turns.map((turn) => turn.text);

    const a = tab("lia");
    await act(() => a.result.current.agent.send("one").then(() => undefined));
    const contextId = a.result.current.agent.contextRef.current!;
    const b = tab("lia"); // the stored id: the same conversation
    const other = tab("max", contextId);
    await waitFor(() => expect(texts(b.result)).toEqual(["one", "Re: one"]));
    await waitFor(() => expect(texts(other.result)).toEqual(["one", "Re: one"]));

    let sent!: Promise<unknown>;
    act(() => void (sent = a.result.current.agent.send("slow two")));
    await waitFor(() => expect(b.result.current.agent.status).toBe("streaming"));
    await act(async () => {
      release();
      await sent;
    });
    await waitFor(() => expect(texts(b.result)).toEqual(["one", "Re: one", "slow two", "Re: slow two"]));
    await waitFor(() => expect(b.result.current.list.conversations).toMatchObject([{ contextId, turnCount: 4 }]));
    expect(other.log.transcripts).toHaveLength(1);
    expect(texts(other.result)).toEqual(["one", "Re: one"]);
  });
});
