export {
  AgentClient,
  type AgentClientOptions,
  type SendResult,
} from "./agent-client.js";
export type { Schedule } from "./notifier.js";
export type { ReconnectOptions } from "./reconnect.js";
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
export {
  WEBSOCKET_SUBPROTOCOL,
  WebSocketTransport,
  webSocketUrl,
  type WebSocketTransportOptions,
} from "./websocket-transport.js";
export {
  MockTransport,
  type MockAttachHandler,
  type MockDecideHandler,
  type MockRunHandler,
  type MockStopHandler,
  type MockTransportHandlers,
} from "./mock-transport.js";
export {
  agentUrl,
  type RunFrame,
  type Transport,
  type TransportAttachRequest,
  type TransportDecideRequest,
  type TransportRunRequest,
  type TransportStopRequest,
  type TransportTarget,
} from "./transport.js";
export * from "./generated/wire.js";
