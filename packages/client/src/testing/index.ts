/**
 * `@thinwire/client/testing`: helpers for testing an app or a transport
 * without a server — a mock Transport, a scripted fake server speaking both
 * wires (and a script that keeps conversations, branches and all), and
 * builders of frames and transcript turns.
 */
export {
  MockTransport,
  type MockAttachHandler,
  type MockDecideHandler,
  type MockRunHandler,
  type MockStopHandler,
  type MockTransportHandlers,
} from "./mock-transport.js";
export {
  fakeFetch,
  fakeWebSocket,
  newLog,
  type ConversationQuery,
  type FakeSocket,
  type Refusal,
  type Reply,
  type Script,
  type ServerLog,
  type TicketRefusal,
  type TranscriptQuery,
} from "./fake-server.js";
export { conversationScript, type Answer, type ConversationScriptOptions } from "./conversation-script.js";
export { channel, runFrames, transcriptTurn, type StartIds } from "./frames.js";
