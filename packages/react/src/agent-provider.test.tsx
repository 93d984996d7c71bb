/** AgentProvider: components sharing one conversation, over both transports; who owns the client. */
import { act, cleanup, fireEvent, render, renderHook, screen, waitFor } from "@testing-library/react";
import { AgentClient, type InterruptRequest, type SendResult, type Transcript } from "@thinwire/client";
import { fakeFetch, fakeWebSocket, MockTransport, newLog, runFrames, type Script, transcriptTurn } from "@thinwire/client/testing";
import { StrictMode, type ReactNode } from "react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AgentProvider } from "./agent-provider.js";
import { useAgent, type UseAgentOptions } from "./use-agent.js";

/** Well-formed conversation ids: the client forgets any other without asking the server. */
const CTX_1 = "ctx-" + "1".repeat(36);
const BOBS = "ctx-" + "b".repeat(36);

const refund: InterruptRequest = {
  interruptId: "int-1",
  prompt: "Refund $40 on order 1234?",
  options: ["approve", "reject"],
  payload: { order: "1234" },
  decisionSchema: null,
};

/** A server whose agent asks before refunding, and refunds once approved. */
function refundServer() {
  const log = newLog();
  const script: Script = {
    run: () => {
      const r = runFrames("ctx-1", "run-1");
      return { frames: [r.start(), r.token("Let me check."), r.interrupt(refund), r.done("Let me check.", [], "interrupted")] };
    },
    decide: (_contextId, decision) => {
      const r = runFrames("ctx-1", "run-2", 10);
      const text = decision.value === "approve" ? "Refunded." : "Not refunded.";
      return { frames: [r.start(), r.done(text)] };
    },
  };
  return { log, script, fetch: fakeFetch(script, log), ...fakeWebSocket(script, log) };
}

function Chat() {
  const { turns, status, send } = useAgent();
  const busy = status === "streaming" || status === "reconnecting";
  return (
    <section>
      {turns.map((turn) => (
        <p key={turn.id} data-testid="turn">
          {turn.text}
        </p>
      ))}
      <button disabled={busy} onClick={() => void send("Refund order 1234").catch(() => undefined)}>
        Send
      </button>
    </section>
  );
}

function Approval() {
  const { interrupt, decide } = useAgent();
  if (!interrupt) return null;
  return (
    <aside>
      <p data-testid="prompt">{interrupt.prompt}</p>
      {interrupt.options?.map((option) => (
        <button key={option} onClick={() => void decide(option).catch(() => undefined)}>
          {option}
        </button>
      ))}
    </aside>
  );
}

function Sidebar() {
  const { turns, status } = useAgent();
  return (
    <p data-testid="sidebar">
      {status}: {turns.length} turns
    </p>
  );
}

beforeEach(() => localStorage.clear());
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  localStorage.clear();
});

describe.each(["sse", "websocket"] as const)("AgentProvider over %s", (transport) => {
  it("lets a chat, an approval card and a sidebar share one conversation", async () => {
    const server = refundServer();
    vi.stubGlobal("WebSocket", server.WebSocket);
    const onFinish = vi.fn();
    render(
      <StrictMode>
        <AgentProvider
          agent="demo"
          baseUrl="http://server.test"
          transport={transport}
          fetch={server.fetch}
          persist={{ userId: "ada" }}
          onFinish={onFinish}
        >
          <Chat />
          <Approval />
          <Sidebar />
        </AgentProvider>
      </StrictMode>,
    );
    expect(screen.getByTestId("sidebar").textContent).toBe("idle: 0 turns");
    fireEvent.click(screen.getByText("Send"));
    // The approval card sees the question the chat's run raised.
    expect((await screen.findByTestId("prompt")).textContent).toBe("Refund $40 on order 1234?");
    expect(screen.getByTestId("sidebar").textContent).toBe("idle: 2 turns");

    fireEvent.click(screen.getByText("approve"));
    await waitFor(() => expect(screen.getAllByTestId("turn").map((turn) => turn.textContent)).toContain("Refunded."));
    expect(screen.queryByTestId("prompt")).toBeNull();
    expect(screen.getByTestId("sidebar").textContent).toBe("idle: 3 turns");
    expect(server.log.runs).toHaveLength(1);
    expect(server.log.decisions).toEqual([{ contextId: "ctx-1", interruptId: "int-1", value: "approve" }]);
    expect(onFinish.mock.calls.map((call) => (call[0] as SendResult).stopReason)).toEqual(["interrupted", "end"]);
    expect(localStorage.getItem("thinwire:demo:ada:contextId")).toBe("ctx-1");
    // One client, one socket.
    if (transport === "websocket") expect(server.sockets).toHaveLength(1);
  });
});

describe("AgentProvider ownership", () => {
  afterEach(() => vi.unstubAllGlobals());

  it("disposes the client it made when it unmounts, closing its socket and cancelling its run", async () => {
    const log = newLog();
    const never = new Promise<never>(() => undefined);
    const { WebSocket, sockets } = fakeWebSocket(
      {
        run: () => ({
          frames: (async function* () {
            yield runFrames("ctx-1", "run-1").start();
            await never;
          })(),
        }),
      },
      log,
    );
    vi.stubGlobal("WebSocket", WebSocket);
    let sent: Promise<unknown> | null = null;
    function Sender() {
      const { send } = useAgent();
      sent ??= send("hi");
      return null;
    }
    const { unmount } = render(
      <StrictMode>
        <AgentProvider agent="demo" baseUrl="http://server.test" transport="websocket">
          <Sender />
        </AgentProvider>
      </StrictMode>,
    );
    await waitFor(() => expect(log.runs).toHaveLength(1));
    unmount();
    await expect(sent).rejects.toMatchObject({ code: "aborted" });
    await waitFor(() => expect(sockets[0]!.readyState).toBe(3));
  });

  it("shares a client you made, starts it, and leaves it to you", async () => {
    const transcript: Transcript = {
      contextId: CTX_1,
      agent: "demo",
      title: null,
      turns: [transcriptTurn("user", "Hello"), transcriptTurn("assistant", "Hi")],
      activeRunId: null,
      pendingInterrupt: null,
      hasEarlier: false,
    };
    const fetch = vi.fn(async () => new Response(JSON.stringify(transcript), { headers: { "content-type": "application/json" } }));
    const transport = new MockTransport(() => {
      const r = runFrames(CTX_1, "run-2", 10);
      return [r.start(), r.done("Again.")];
    });
    const client = new AgentClient({ agent: "demo", contextId: CTX_1, transport, fetch });
    const { unmount } = render(
      <AgentProvider client={client}>
        <Sidebar />
      </AgentProvider>,
    );
    await waitFor(() => expect(screen.getByTestId("sidebar").textContent).toBe("idle: 2 turns"));
    expect(fetch).toHaveBeenCalledTimes(1); // started by the binding
    unmount();
    await act(async () => {
      await Promise.resolve();
    });
    // Still the caller's, and alive.
    expect((await client.send("more")).text).toBe("Again.");
    expect(transport.closed).toBe(false);
    client.dispose();
  });

  it("calls the latest callbacks it was given", async () => {
    const transport = new MockTransport(() => {
      const r = runFrames("ctx-1", `run-${transport.requests.length}`, 10 * transport.requests.length);
      return [r.start(), r.done("ok")];
    });
    const first = vi.fn();
    const second = vi.fn();
    let view: ReturnType<typeof useAgent> | null = null;
    function Probe() {
      view = useAgent();
      return null;
    }
    const tree = (onFinish: () => void) => (
      <AgentProvider agent="demo" transport={transport} onFinish={onFinish}>
        <Probe />
      </AgentProvider>
    );
    const { rerender } = render(tree(first));
    const send = view!.send;
    rerender(tree(second));
    expect(view!.send).toBe(send); // the same client
    await act(async () => {
      await view!.send("hi");
    });
    expect(first).not.toHaveBeenCalled();
    expect(second).toHaveBeenCalledTimes(1);
  });

  it("switches every component to the other user's conversation when persist.userId changes", async () => {
    localStorage.setItem("thinwire:demo:bob:contextId", BOBS);
    const transcripts: Record<string, Transcript> = {
      [BOBS]: {
        contextId: BOBS,
        agent: "demo",
        title: null,
        turns: [transcriptTurn("user", "I am Bob")],
        activeRunId: null,
        pendingInterrupt: null,
        hasEarlier: false,
      },
    };
    const fetch = async (input: RequestInfo | URL) => {
      const contextId = new URL(String(input), "http://server.test").pathname.split("/contexts/")[1] ?? "";
      return new Response(JSON.stringify(transcripts[contextId]), { headers: { "content-type": "application/json" } });
    };
    const transport = new MockTransport(() => []);
    const tree = (userId: string) => (
      <AgentProvider agent="demo" transport={transport} fetch={fetch} persist={{ userId }}>
        <Sidebar />
        <Chat />
      </AgentProvider>
    );
    const { rerender } = render(tree("alice"));
    expect(screen.getByTestId("sidebar").textContent).toBe("idle: 0 turns");
    rerender(tree("bob"));
    await waitFor(() => expect(screen.getByTestId("sidebar").textContent).toBe("idle: 1 turns"));
    expect(screen.getAllByTestId("turn").map((turn) => turn.textContent)).toEqual(["I am Bob"]);
  });
});

describe("useAgent binding", () => {
  it("without options and outside a provider, says where to put it", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    expect(() => renderHook(() => useAgent())).toThrow(/AgentProvider/);
    vi.restoreAllMocks();
  });

  it("binds to a client you made with useAgent({ client }), and never disposes it", async () => {
    const transport = new MockTransport(() => {
      const r = runFrames("ctx-1", `run-${transport.requests.length}`, 10 * transport.requests.length);
      return [r.start(), r.done("ok")];
    });
    const client = new AgentClient({ agent: "demo", transport });
    const { result, unmount } = renderHook(() => useAgent({ client }), { reactStrictMode: true });
    await act(async () => {
      await result.current.send("hi");
    });
    expect(client.getSnapshot().turns).toHaveLength(2);
    expect(result.current.turns).toBe(client.getSnapshot().turns);
    unmount();
    await act(async () => {
      await Promise.resolve();
    });
    expect((await client.send("still mine")).text).toBe("ok");
    client.dispose();
  });

  it("takes either form chosen at run time, in one call (a union of the two)", async () => {
    const transport = new MockTransport(() => {
      const r = runFrames("ctx-1", "run-1", 10);
      return [r.start(), r.done("ok")];
    });
    const client = new AgentClient({ agent: "demo", transport });
    const { result, rerender } = renderHook(
      ({ own }: { own: boolean }) => useAgent(own ? { client } : { agent: "demo", transport }),
      { initialProps: { own: true } },
    );
    await act(async () => {
      await result.current.send("hi");
    });
    expect(result.current.turns).toBe(client.getSnapshot().turns);
    rerender({ own: false });
    expect(result.current.turns).toEqual([]); // a client of its own
    client.dispose();
  });

  it("keeps useAgent(options) a client of its own, apart from the provider's", async () => {
    const shared = new MockTransport(() => []);
    const own = new MockTransport(() => {
      const r = runFrames("ctx-own", "run-1");
      return [r.start(), r.done("mine")];
    });
    const wrapper = ({ children }: { children: ReactNode }) => (
      <AgentProvider agent="demo" transport={shared}>
        {children}
      </AgentProvider>
    );
    const { result } = renderHook(
      () => ({ own: useAgent({ agent: "demo", transport: own } satisfies UseAgentOptions), shared: useAgent() }),
      { wrapper },
    );
    await act(async () => {
      await result.current.own.send("hi");
    });
    expect(result.current.own.turns).toHaveLength(2);
    expect(result.current.shared.turns).toHaveLength(0);
    expect(shared.requests).toHaveLength(0);
  });
});
