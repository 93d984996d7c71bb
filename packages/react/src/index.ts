/** `@thinwire/react`: `useAgent`, and the client types a React app needs. */
export { contextStorageKey, useAgent, type UseAgentOptions, type UseAgentResult } from "./use-agent.js";
export type {
  Activity,
  AgentErrorInfo,
  ErrorCode,
  InterruptRequest,
  ReconnectOptions,
  SendResult,
  Snapshot,
  Status,
  Transport,
  Turn,
} from "@thinwire/client";
export { ThinwireError } from "@thinwire/client";
