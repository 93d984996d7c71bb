// @generated — DO NOT EDIT. Produced from server/thinwire/wire.py by `make schema`.

export const PROTOCOL_VERSION = "1";
export const PROTOCOL_HEADER = "Thinwire-Protocol";

/** WebSocket: follow the latest run of a context, like `GET …/events`. */
export interface AttachCommand {
  type: "attach";
  contextId: string;
  /** Send only frames with a greater seq. */
  after?: number;
}

/** WebSocket: answer a pending interrupt, like `POST …/decisions`. */
export interface DecideCommand {
  type: "decide";
  contextId: string;
  interruptId: string;
  /** One of the offered options, or JSON matching the schema. */
  value: unknown;
}

/** Body of `POST …/decisions`: a person's answer to a pending interrupt. */
export interface DecisionRequest {
  interruptId: string;
  /** One of the offered options, or JSON matching the schema. */
  value: unknown;
}

/** Last frame of a run. */
export interface DoneFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "done";
  /** The final reply text (the concatenated token deltas). */
  text: string;
  /** Tool names in call order. */
  toolCalls: string[];
  stopReason: "end" | "stopped" | "interrupted" | "error";
}

/** Body of every 4xx response. */
export interface ErrorBody {
  error: ErrorDetail;
}

export interface ErrorDetail {
  /** Stable, machine-readable error code. */
  code: string;
  /** Human-readable explanation. */
  message: string;
  /** With `decision_pending`: the interrupt to answer first. */
  interruptId?: string | null;
}

/** The run failed; a `done` with stop reason `error` follows. */
export interface ErrorFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "error";
  code: string;
  message: string;
  retryable: boolean;
}

/** The run needs a person's decision; a `done` with stop reason `interrupted` follows. */
export interface InterruptFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "interrupt";
  interrupt: InterruptRequest;
}

/** What the agent asks a person: only what it chose to make public. */
export interface InterruptRequest {
  interruptId: string;
  prompt: string;
  /** The answers to choose from; null when free-form. */
  options: string[] | null;
  /** Public details for the UI to show. */
  payload: unknown;
  /** JSON Schema a free-form answer must match. */
  decisionSchema: Record<string, unknown> | null;
}

/** A user message. */
export interface Message {
  /** What the user typed; never empty. */
  text: string;
}

/** WebSocket: a command the server refused — the equivalent of an HTTP 4xx. `no_run` answers an attach when there is nothing to follow. */
export interface RejectedFrame {
  type: "rejected";
  code: string;
  message: string;
  command: "send" | "attach" | "stop" | "decide" | null;
  contextId: string | null;
}

/** Body of `POST /agents/{agent}/runs`: start a run, in a new or an existing context. */
export interface RunRequest {
  /** Continue this conversation; omit to start a new one (the server mints the id). */
  contextId?: string | null;
  message: Message;
}

/** First frame of every run: announces the context id (minted or given) and run id. */
export interface RunStartFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "run_start";
  agent: string;
}

/** WebSocket: start a run, like `POST /agents/{agent}/runs`. */
export interface SendCommand {
  type: "send";
  contextId?: string | null;
  message: Message;
}

/** WebSocket: stop the run in progress, like `POST …/stop`. */
export interface StopCommand {
  type: "stop";
  contextId: string;
}

/** Body of `POST …/stop`. */
export interface StopResult {
  contextId: string;
  /** The run being stopped; null if none was running. */
  runId: string | null;
  stopping: boolean;
}

/** A delta of the agent's public reasoning. */
export interface ThinkingFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "thinking";
  delta: string;
}

/** A delta of the reply text. */
export interface TokenFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "token";
  delta: string;
}

/** The agent started a tool. Arguments stay on the server. */
export interface ToolCallFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "tool_call";
  callId: string;
  name: string;
}

/** A tool finished. Its output stays on the server; only success is public. */
export interface ToolResultFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "tool_result";
  callId: string;
  name: string;
  ok: boolean;
}

/** Body of `GET /agents/{agent}/contexts/{contextId}`: what a resumed UI shows. */
export interface Transcript {
  contextId: string;
  agent: string;
  turns: TranscriptTurn[];
  /** The run in progress, if any: attach to its events to follow it. */
  activeRunId: string | null;
  /** A decision the conversation waits for, if any. */
  pendingInterrupt: InterruptRequest | null;
}

/** One public turn of a conversation: what the user said or what the agent replied. */
export interface TranscriptTurn {
  role: "user" | "assistant";
  text: string;
  /** Tool names the agent called for this reply. */
  toolCalls: string[];
  /** Why the reply ended; null on user turns. */
  stopReason: "end" | "stopped" | "interrupted" | "error" | null;
}

/** Every frame the server sends, discriminated by `type`. */
export type Frame =
  | RunStartFrame
  | ThinkingFrame
  | ToolCallFrame
  | ToolResultFrame
  | TokenFrame
  | InterruptFrame
  | DoneFrame
  | ErrorFrame
  | RejectedFrame;

/** Every WebSocket command a client sends, discriminated by `type`. */
export type Command = SendCommand | AttachCommand | StopCommand | DecideCommand;

export type FrameType = Frame["type"];
export type StopReason = DoneFrame["stopReason"];
