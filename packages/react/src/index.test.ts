// @vitest-environment node
/** The public names of `@thinwire/react`, locked: a new export is a deliberate change to this list. */
import { describe, expect, it } from "vitest";
import { expectNodeEngine, expectRequireResolvesAsImport } from "../../client/src/test-helpers.js";
import * as client from "@thinwire/client";
import * as react from "./index.js";

describe("the package's exports", () => {
  it("@thinwire/react exports the hooks, the provider, its storage key and the client's class and error class", () => {
    expect(Object.keys(react).sort()).toEqual([
      "AgentClient",
      "AgentProvider",
      "ThinwireError",
      "contextStorageKey",
      "useAgent",
      "useConversations",
    ]);
  });

  it("re-exports @thinwire/client's contextStorageKey: one key, whichever package names it", () => {
    expect(react.contextStorageKey).toBe(client.contextStorageKey);
  });

  it("@thinwire/react resolves for require() as for import: every entry has a default condition, the same ESM file", () => {
    expectRequireResolvesAsImport(new URL("../package.json", import.meta.url));
  });

  it("@thinwire/react declares the Node.js the README names, the first to require() ESM without a flag", () => {
    expectNodeEngine(new URL("../package.json", import.meta.url));
  });
});
