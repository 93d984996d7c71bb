/**
 * Server rendering: HTML made by `renderToString` (where there is no storage,
 * as on a server) hydrates without a mismatch when `persist` has an id stored
 * on the client, and the stored conversation is shown once hydrated — one
 * transcript request, no run. An explicit `contextId` is rendered on the server
 * without its transcript too: that loads once hydrated.
 */
import { act, cleanup, waitFor } from "@testing-library/react";
import { AgentClient } from "@thinwire/client";
import { conversationScript, fakeFetch, newLog } from "@thinwire/client/testing";
import { type ReactElement, StrictMode } from "react";
import { hydrateRoot, type Root } from "react-dom/client";
import { renderToString } from "react-dom/server";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AgentProvider } from "./agent-provider.js";
import { contextStorageKey, useAgent } from "./use-agent.js";
import { useConversations } from "./use-conversations.js";

function Chat() {
  const { turns, contextRef, status } = useAgent();
  const { selected } = useConversations();
  return (
    <main>
      <p data-testid="selected">{selected ?? "new"}</p>
      <p data-testid="context">{contextRef.current ?? "none"}</p>
      <p data-testid="status">{status}</p>
      {turns.map((turn) => (
        <p key={turn.id} data-testid="turn">
          {turn.text}
        </p>
      ))}
    </main>
  );
}

function Standalone() {
  const { turns, contextRef } = useAgent({
    agent: "demo",
    baseUrl: "http://server.test",
    fetch: current.fetch,
    persist: { userId: "ada" },
  });
  return (
    <main>
      <p data-testid="context">{contextRef.current ?? "none"}</p>
      {turns.map((turn) => (
        <p key={turn.id} data-testid="turn">
          {turn.text}
        </p>
      ))}
    </main>
  );
}

let current: { fetch: typeof fetch; log: ReturnType<typeof newLog> };
let root: Root | null = null;
let container: HTMLElement;

beforeEach(() => {
  localStorage.clear();
  const log = newLog();
  current = { log, fetch: fakeFetch(conversationScript({ answer: (text) => ({ text: `Re: ${text}`, title: text }) }), log) };
  container = document.createElement("div");
  document.body.append(container);
});

afterEach(() => {
  act(() => root?.unmount());
  root = null;
  container.remove();
  cleanup();
  localStorage.clear();
});

/** A conversation on the server, its id stored as `persist` stores it, as a reload finds them. */
async function storedConversation(): Promise<string> {
  const client = new AgentClient({ agent: "demo", baseUrl: "http://server.test", fetch: current.fetch });
  const { contextId } = await client.send("Hello");
  client.dispose();
  current.log.runs.length = 0;
  localStorage.setItem(contextStorageKey("demo", "ada"), contextId);
  return contextId;
}

/** Renders `app` as a server does (no storage), then hydrates it with the id stored; the recoverable errors React reported. */
async function serverRenderThenHydrate(app: ReactElement, contextId: string): Promise<unknown[]> {
  localStorage.clear(); // the server has no storage
  container.innerHTML = renderToString(app);
  localStorage.setItem(contextStorageKey("demo", "ada"), contextId);
  const errors: unknown[] = [];
  await act(async () => {
    root = hydrateRoot(container, app, { onRecoverableError: (error) => errors.push(error) });
  });
  return errors;
}

const text = (id: string) => container.querySelector(`[data-testid="${id}"]`)?.textContent;
const turns = () => [...container.querySelectorAll('[data-testid="turn"]')].map((node) => node.textContent);

describe("server rendering with persist", () => {
  it("hydrates the server's HTML without a mismatch, then shows the stored conversation (one transcript, one list, no run)", async () => {
    const contextId = await storedConversation();
    const app = (
      <StrictMode>
        <AgentProvider agent="demo" baseUrl="http://server.test" fetch={current.fetch} persist={{ userId: "ada" }}>
          <Chat />
        </AgentProvider>
      </StrictMode>
    );
    const errors = await serverRenderThenHydrate(app, contextId);
    expect(errors).toEqual([]);
    await waitFor(() => expect(turns()).toEqual(["Hello", "Re: Hello"]));
    expect(text("selected")).toBe(contextId);
    expect(text("context")).toBe(contextId);
    expect(text("status")).toBe("idle");
    expect(current.log.transcripts).toHaveLength(1);
    expect(current.log.listings).toHaveLength(1);
    expect(current.log.runs).toEqual([]);
    expect(localStorage.getItem(contextStorageKey("demo", "ada"))).toBe(contextId);
  });

  it("hydrates useAgent(options) the same way", async () => {
    const contextId = await storedConversation();
    const errors = await serverRenderThenHydrate(<Standalone />, contextId);
    expect(errors).toEqual([]);
    await waitFor(() => expect(turns()).toEqual(["Hello", "Re: Hello"]));
    expect(text("context")).toBe(contextId);
    expect(current.log.transcripts).toHaveLength(1);
    expect(current.log.runs).toEqual([]);
  });

  it("renders no conversation on the server, whatever the storage holds", async () => {
    const contextId = await storedConversation();
    const html = renderToString(<Standalone />);
    expect(html).toContain(">none<");
    expect(html).not.toContain(contextId);
    expect(current.log.transcripts).toEqual([]);
  });
});

describe("server rendering with contextId", () => {
  it("renders the id but no transcript on the server: the turns load once hydrated", async () => {
    const contextId = await storedConversation();
    localStorage.clear();
    const app = (
      <AgentProvider agent="demo" baseUrl="http://server.test" fetch={current.fetch} contextId={contextId}>
        <Chat />
      </AgentProvider>
    );
    const html = renderToString(app);
    expect(html).toContain(contextId);
    expect(html).toContain('data-testid="status">idle<');
    expect(html).not.toContain('data-testid="turn"');
    expect(current.log.transcripts).toEqual([]);
    container.innerHTML = html;
    const errors: unknown[] = [];
    await act(async () => {
      root = hydrateRoot(container, app, { onRecoverableError: (error) => errors.push(error) });
    });
    expect(errors).toEqual([]);
    await waitFor(() => expect(turns()).toEqual(["Hello", "Re: Hello"]));
    expect(current.log.transcripts).toHaveLength(1);
  });
});
