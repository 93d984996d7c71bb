"use client";
/** `@thinwire/react`: `useAgent`, `AgentProvider`, `useConversations`, and the client types a React app needs. */
export { AgentProvider, type AgentProviderProps } from "./agent-provider.js";
export { contextStorageKey, useAgent, type UseAgentOptions, type UseAgentResult } from "./use-agent.js";
export { useConversations, type UseConversationsOptions, type UseConversationsResult } from "./use-conversations.js";
export type {
  Activity,
  AgentClientOptions,
  AgentErrorInfo,
  ConversationListSnapshot,
  ConversationSummary,
  ErrorCode,
  InterruptRequest,
  PersistStorage,
  ReconnectOptions,
  SendOptions,
  SendResult,
  Snapshot,
  Status,
  Transport,
  Turn,
  TurnAsked,
  TurnMeta,
  TurnStopReason,
} from "@thinwire/client";
export { AgentClient, ThinwireError } from "@thinwire/client";
