// @vitest-environment node
/// <reference types="node" />
/**
 * The declarations the package ships (`dist/*.d.ts`), emitted in memory as
 * `npm run build` emits them, over those of @thinwire/client: a Node.js project
 * without the DOM library (server rendering, a test runner) compiles against
 * them.
 */
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { emittedDeclarations, nodeProjectErrors } from "../../client/src/test-helpers.js";

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
      import { AgentProvider, contextStorageKey, useAgent, useConversations, type UseAgentOptions } from "./dist/index.js";
      const storage = new Map<string, string>();
      const options: UseAgentOptions = {
        agent: "demo",
        credentials: "include",
        persist: {
          userId: "ada",
          storage: {
            getItem: (key) => storage.get(key) ?? null,
            setItem: (key, value) => void storage.set(key, value),
            removeItem: (key) => void storage.delete(key),
          },
        },
      };
      void [options, AgentProvider, contextStorageKey, useAgent, useConversations];
    `;
    const errors = await nodeProjectErrors(`${root}node-consumer.ts`, consumer, declarations, {
      "@thinwire/client": [`${client}dist/index.ts`],
    });
    expect(errors).toEqual([]);
  });
});
