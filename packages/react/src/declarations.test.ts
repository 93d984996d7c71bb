// @vitest-environment node
/// <reference types="node" />
/**
 * The declarations the package ships (`dist/*.d.ts`), emitted in memory as
 * `npm run build` emits them, over those of @thinwire/client: a Node.js project
 * without the DOM library (server rendering, a test runner) compiles against
 * them, with `exactOptionalPropertyTypes` too. And its JavaScript: every
 * module that uses React's hooks or context begins with `"use client"`, so a
 * Server Component (Next.js) may render `<AgentProvider>`.
 */
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { emittedDeclarations, emittedJavaScript, nodeProjectErrors } from "../../client/src/test-helpers.js";

const root = fileURLToPath(new URL("..", import.meta.url));
const client = fileURLToPath(new URL("../../client/", import.meta.url));
/** @thinwire/client, as this package's built declarations import it. */
const paths = { "@thinwire/client": [`${client}dist/index.d.ts`] };

describe("the declarations @thinwire/react ships", () => {
  let declarations: Map<string, string>;
  beforeAll(async () => {
    const clientDeclarations = await emittedDeclarations(`${client}tsconfig.build.json`);
    const own = await emittedDeclarations(`${root}tsconfig.build.json`, { paths }, clientDeclarations);
    declarations = new Map([...clientDeclarations, ...own]);
  }, 60_000); // a build of both packages

  it("compile in a Node.js project without the DOM library", { timeout: 30_000 }, async () => {
    const consumer = `
      import {
        AgentProvider,
        contextStorageKey,
        useAgent,
        useConversations,
        type PersistStorage,
        type UseAgentOptions,
      } from "./dist/index.js";
      const memory = new Map<string, string>();
      const storage: PersistStorage = {
        getItem: (key) => memory.get(key) ?? null,
        setItem: (key, value) => void memory.set(key, value),
        removeItem: (key) => void memory.delete(key),
      };
      const options: UseAgentOptions = { agent: "demo", credentials: "include", persist: { userId: "ada", storage } };
      void [options, AgentProvider, contextStorageKey, useAgent, useConversations];
    `;
    const errors = await nodeProjectErrors(`${root}node-consumer.ts`, consumer, declarations, {
      "@thinwire/client": [`${client}dist/index.ts`],
    });
    expect(errors).toEqual([]);
  });

  it("take undefined for an option not given, under exactOptionalPropertyTypes", { timeout: 30_000 }, async () => {
    const consumer = `
      import { AgentProvider, useAgent, useConversations, type UseAgentOptions, type UseConversationsOptions } from "./dist/index.js";
      declare const env: Record<string, string | undefined>;
      const base = env["AGENT_URL"];
      const options: UseAgentOptions = {
        agent: "demo",
        baseUrl: base,
        transport: undefined,
        fetch: undefined,
        credentials: undefined,
        headers: undefined,
        contextId: undefined,
        pageSize: undefined,
        persist: { userId: "ada", storage: undefined },
        reconnect: { attempts: undefined, baseDelayMs: undefined, maxDelayMs: undefined },
        onContext: undefined,
        onFinish: undefined,
        onError: undefined,
      };
      const list: UseConversationsOptions = {
        agent: "demo",
        baseUrl: base,
        pageSize: undefined,
        headers: undefined,
        credentials: undefined,
        fetch: undefined,
        client: undefined,
      };
      export function uses() {
        useAgent({ agent: "demo", baseUrl: base, persist: undefined });
        useConversations({ agent: "demo", baseUrl: base });
        return useAgent().send("hi", { data: undefined });
      }
      void [options, list, AgentProvider];
    `;
    const errors = await nodeProjectErrors(
      `${root}node-consumer.ts`,
      consumer,
      declarations,
      { "@thinwire/client": [`${client}dist/index.ts`] },
      { exactOptionalPropertyTypes: true },
    );
    expect(errors).toEqual([]);
  });
});

describe("the JavaScript @thinwire/react ships", () => {
  it('begins every module that uses hooks or context, and the entry, with "use client"', { timeout: 30_000 }, async () => {
    const modules = await emittedJavaScript(`${root}tsconfig.build.json`);
    const name = (path: string) => path.slice(`${root}dist/`.length);
    const marked = [...modules].filter(([, text]) => text.startsWith('"use client";\n')).map(([path]) => name(path));
    const react = [...modules].filter(([, text]) => /from "react"/.test(text)).map(([path]) => name(path));
    expect(marked).toContain("index.js");
    expect(marked).toContain("agent-provider.js");
    expect(react.filter((module) => !marked.includes(module))).toEqual([]);
    // Plain modules stay unmarked: nothing of React in them.
    expect(marked).not.toContain("context-storage.js");
  });
});
