import { fileURLToPath } from "node:url";
import { defineProject } from "vitest/config";

export default defineProject({
  resolve: {
    // Test against the client's source, so no build is needed first.
    alias: { "@thinwire/client": fileURLToPath(new URL("../client/src/index.ts", import.meta.url)) },
  },
  test: {
    name: "react",
    environment: "jsdom",
    include: ["src/**/*.test.{ts,tsx}"],
  },
});
