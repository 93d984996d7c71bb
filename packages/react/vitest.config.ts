import { fileURLToPath } from "node:url";
import { defineProject } from "vitest/config";

const client = (path: string) => fileURLToPath(new URL(`../client/src/${path}`, import.meta.url));

export default defineProject({
  resolve: {
    // Test against the client's source, so no build is needed first.
    alias: [
      { find: /^@thinwire\/client\/testing$/, replacement: client("testing/index.ts") },
      { find: /^@thinwire\/client$/, replacement: client("index.ts") },
    ],
  },
  test: {
    name: "react",
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
