/**
 * The public names of `@thinwire/client` and `@thinwire/client/testing`, locked:
 * a new export is a deliberate change to this list.
 */
import { describe, expect, it } from "vitest";
import * as client from "./index.js";
import { expectNodeEngine, expectRequireResolvesAsImport } from "./test-helpers.js";
import * as testing from "./testing/index.js";

describe("the package's exports", () => {
  it("@thinwire/client exports only what an app or a custom transport needs", () => {
    expect(Object.keys(client).sort()).toEqual([
      "AgentClient",
      "CLOSE_CODES",
      "ConversationList",
      "ERROR_CODES",
      "FRAME_TYPES",
      "HEARTBEAT_HEADER",
      "MIN_FRAME_INTERVAL_MS",
      "PROTOCOL_HEADER",
      "PROTOCOL_VERSION",
      "RETRYABLE_CODES",
      "STOP_REASONS",
      "SseTransport",
      "ThinwireError",
      "WEBSOCKET_SUBPROTOCOL",
      "WEBSOCKET_SUBPROTOCOL_LINES",
      "WebSocketTransport",
      "contextStorageKey",
      "nextFrame",
    ]);
  });

  it("exports contextStorageKey, the key @thinwire/react's persist stores the id under, for code without React", () => {
    expect(client.contextStorageKey("demo", "ada@example.com")).toBe("thinwire:demo:ada%40example.com:contextId");
  });

  it("@thinwire/client/testing exports the test helpers", () => {
    expect(Object.keys(testing).sort()).toEqual([
      "MockTransport",
      "channel",
      "conversationScript",
      "fakeFetch",
      "fakeWebSocket",
      "newLog",
      "runFrames",
      "transcriptTurn",
    ]);
  });

  it("@thinwire/client resolves for require() as for import: every entry has a default condition, the same ESM file", () => {
    expectRequireResolvesAsImport(new URL("../package.json", import.meta.url));
  });

  it("@thinwire/client declares the Node.js the README names, the first to require() ESM without a flag", () => {
    expectNodeEngine(new URL("../package.json", import.meta.url));
  });
});
