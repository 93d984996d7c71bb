export { contextStorageKey, useAgent, type UseAgentOptions, type UseAgentResult } from "./use-agent.js";
export type {
  Activity,
  AgentErrorInfo,
  InterruptRequest,
  ReconnectOptions,
  SendResult,
  Snapshot,
  Status,
  Transport,
  Turn,
} from "@thinwire/client";
export { ThinwireError } from "@thinwire/client";
