/** `@thinwire/react`: `useAgent`, `AgentProvider`, and the client types a React app needs. */
export { AgentProvider, type AgentProviderProps } from "./agent-provider.js";
export { contextStorageKey, useAgent, type UseAgentOptions, type UseAgentResult } from "./use-agent.js";
export type {
  Activity,
  AgentClientOptions,
  AgentErrorInfo,
  ErrorCode,
  InterruptRequest,
  ReconnectOptions,
  SendOptions,
  SendResult,
  Snapshot,
  Status,
  Transport,
  Turn,
} from "@thinwire/client";
export { AgentClient, ThinwireError } from "@thinwire/client";
