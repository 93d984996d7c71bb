/**
 * `@thinwire/client/testing`: helpers for testing an app or a transport
 * without a server — a mock Transport, a scripted fake server speaking both
 * wires, and frame builders.
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
  type FakeSocket,
  type Reply,
  type Script,
  type ServerLog,
  type TicketRefusal,
} from "./fake-server.js";
export { channel, runFrames } from "./frames.js";
