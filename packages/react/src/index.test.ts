// @vitest-environment node
/** The public names of `@thinwire/react`, locked: a new export is a deliberate change to this list. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
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

  it("@thinwire/react resolves for require() as for import: every entry has a default condition, the same ESM file", () => {
    const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as {
      exports: Record<string, string | Record<string, string>>;
    };
    const entries = Object.entries(manifest.exports).filter(([, target]) => typeof target !== "string");
    expect(entries.length).toBeGreaterThan(0);
    for (const [entry, conditions] of entries) {
      expect({ entry, conditions: Object.keys(conditions) }).toEqual({ entry, conditions: ["types", "import", "default"] });
      expect({ entry, target: (conditions as Record<string, string>).default }).toEqual({
        entry,
        target: (conditions as Record<string, string>).import,
      });
    }
  });
});
