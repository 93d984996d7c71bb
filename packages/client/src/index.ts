/**
 * `@thinwire/client`: what an app or a custom transport needs. Test helpers
 * live in `@thinwire/client/testing`; everything else is internal.
 */
export { AgentClient, type AgentClientOptions, type SendOptions, type SendResult } from "./agent-client.js";
export { contextStorageKey, type PersistStorage } from "./context-storage-key.js";
export {
  ConversationList,
  type ConversationListOptions,
  type ConversationListSnapshot,
} from "./conversation-list.js";
export { ThinwireError, type ThinwireErrorOptions } from "./errors.js";
export { MIN_FRAME_INTERVAL_MS, nextFrame } from "./frame-schedule.js";
export type { CredentialsMode } from "./http.js";
export type { Schedule } from "./notifier.js";
export type { ReconnectOptions } from "./reconnect.js";
export type { Activity, AgentErrorInfo, Snapshot, Status, Turn, TurnStopReason } from "./snapshot.js";
export { SseTransport, type SseTransportOptions } from "./sse-transport.js";
export type {
  RunFrame,
  Transport,
  TransportAttachRequest,
  TransportDecideRequest,
  TransportEditRequest,
  TransportRegenerateRequest,
  TransportRunRequest,
  TransportStopRequest,
  TransportTarget,
} from "./transport.js";
export { WebSocketTransport, type WebSocketTransportOptions } from "./websocket-transport.js";
// The protocol, generated from the server's wire models.
export {
  CLOSE_CODES,
  ERROR_CODES,
  FRAME_TYPES,
  HEARTBEAT_HEADER,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  RETRYABLE_CODES,
  STOP_REASONS,
  WEBSOCKET_SUBPROTOCOL,
  WEBSOCKET_SUBPROTOCOL_LINES,
  type BranchRequest,
  type ClientErrorCode,
  type Command,
  type ConversationPage,
  type ConversationSummary,
  type DecisionRequest,
  type EditRequest,
  type ErrorBody,
  type ErrorCode,
  type ErrorDetail,
  type Frame,
  type FrameType,
  type InterruptRequest,
  type RegenerateRequest,
  type RenameRequest,
  type RunRequest,
  type ServerErrorCode,
  type StopReason,
  type StopResult,
  type Ticket,
  type Transcript,
  type TranscriptTurn,
  type TurnAsked,
  type TurnMeta,
  type TurnUsage,
} from "./generated/wire.js";
