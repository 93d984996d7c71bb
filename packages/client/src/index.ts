export { AgentClient, type AgentClientOptions, type SendResult } from "./agent-client.js";
export { ThinwireError } from "./errors.js";
export { checkProtocol, errorFromResponse, fetchTranscript } from "./http.js";
export {
  acceptsFrame,
  initialReducerState,
  reduceFrame,
  reduceFrames,
  type ReducerState,
} from "./reduce.js";
export {
  emptySnapshot,
  type Activity,
  type AgentErrorInfo,
  type Snapshot,
  type Status,
  type Turn,
} from "./snapshot.js";
export { parseSse, SseParser, type SseEvent } from "./sse.js";
export { SseTransport, type SseTransportOptions } from "./sse-transport.js";
export { MockTransport, type MockRunHandler } from "./mock-transport.js";
export type { Transport, TransportRunRequest } from "./transport.js";
export * from "./generated/wire.js";
