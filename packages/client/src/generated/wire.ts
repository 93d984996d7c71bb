// @generated — DO NOT EDIT. Produced from server/thinwire/wire.py by `make schema`.

export const PROTOCOL_VERSION = "1";
export const PROTOCOL_HEADER = "Thinwire-Protocol";
/** On an SSE stream: seconds of silence after which the server sends a heartbeat ("0": none). */
export const HEARTBEAT_HEADER = "Thinwire-Heartbeat";

/** A tool the agent called in a turn: its name and whether it succeeded (null: it did not finish). Never its arguments or output. */
export interface Activity {
  callId: string;
  name: string;
  ok: boolean | null;
}

/** WebSocket: follow the latest run of a context, like `GET …/events`. */
export interface AttachCommand {
  requestId?: string | null;
  type: "attach";
  contextId: string;
  /** Send only frames with a greater seq. */
  after?: number;
}

/** Body of `POST …/branch`: show alternative `index` at the turn `turnId`. */
export interface BranchRequest {
  /** A turn's id: stable for the life of the conversation. */
  turnId: string;
  index: number;
}

/** Body of `GET /agents/{agent}/contexts`: the caller's conversations, the most recently active first. */
export interface ConversationPage {
  conversations: ConversationSummary[];
  /** Pass as `cursor` for the next page. */
  nextCursor: string | null;
}

/** One of the caller's conversations, in `GET /agents/{agent}/contexts`. */
export interface ConversationSummary {
  contextId: string;
  title: string | null;
  createdAt: number;
  updatedAt: number;
  /** Turns on the conversation's current branch. */
  turnCount: number;
  /** The start of its latest public text. */
  preview: string;
  /** `running`: a reply is streaming; `waiting`: a decision is pending. */
  status: "idle" | "running" | "waiting";
}

/** WebSocket: answer a pending interrupt, like `POST …/decisions`. */
export interface DecideCommand {
  requestId?: string | null;
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

/** WebSocket: like `POST …/edits`. */
export interface EditCommand {
  requestId?: string | null;
  type: "edit";
  contextId: string;
  /** A turn's id: stable for the life of the conversation. */
  turnId: string;
  messageId?: string | null;
  message: Message;
  data?: Record<string, unknown> | null;
}

/** Body of `POST …/edits`: send `message` in place of the user's turn `turnId` (of any branch: its branch is shown first), on a new branch; the reply streams as for a send. */
export interface EditRequest {
  /** A turn's id: stable for the life of the conversation. */
  turnId: string;
  messageId?: string | null;
  message: Message;
  data?: Record<string, unknown> | null;
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
  /** The same request may succeed when tried again later. */
  retryable?: boolean;
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

/** WebSocket: the socket is alive, sent while a run it follows is quiet (no run's frame; a client notes it and reads on). */
export interface Heartbeat {
  type: "heartbeat";
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

/** WebSocket: like `POST …/regenerate`. */
export interface RegenerateCommand {
  requestId?: string | null;
  type: "regenerate";
  contextId: string;
  messageId?: string | null;
  /** The reply to regenerate (or another turn of its exchange), the last the client shows: of the branch shown, or of another, which it then becomes (as if switched to). `branch_moved` (409, nothing recorded) when the conversation went on from that exchange, or was cleared, since. Omitted: the last reply of the branch shown. */
  turnId?: string | null;
}

/** Body of `POST …/regenerate`: answer the last message again, on a new branch. */
export interface RegenerateRequest {
  messageId?: string | null;
  /** The reply to regenerate (or another turn of its exchange), the last the client shows: of the branch shown, or of another, which it then becomes (as if switched to). `branch_moved` (409, nothing recorded) when the conversation went on from that exchange, or was cleared, since. Omitted: the last reply of the branch shown. */
  turnId?: string | null;
}

/** WebSocket: a command the server refused — the equivalent of an HTTP 4xx. `no_run` answers an attach when there is nothing to follow. */
export interface RejectedFrame {
  type: "rejected";
  code: string;
  message: string;
  retryable: boolean;
  command: "send" | "attach" | "stop" | "decide" | "edit" | "regenerate" | null;
  contextId: string | null;
  /** The `requestId` of the refused command. */
  requestId: string | null;
  /** With `decision_pending`: the interrupt to answer first. */
  interruptId: string | null;
}

/** Body of `PATCH /agents/{agent}/contexts/{contextId}`: at most 200 characters. */
export interface RenameRequest {
  title: string;
}

/** Body of `POST /agents/{agent}/runs`: start a run, in a new or an existing context. */
export interface RunRequest {
  /** Continue this conversation; omit to start a new one (the server mints the id). */
  contextId?: string | null;
  messageId?: string | null;
  message: Message;
  data?: Record<string, unknown> | null;
  /** The last turn the client shows (any turn of that exchange): the message goes on the branch that ends there, the branch shown or another, which it then becomes (as if switched to), so a tab left on a branch another tab switched away from continues what its user sees. `branch_moved` (409, nothing recorded) when the conversation went on from that exchange, or was cleared, since. Omitted: after the branch shown. */
  afterTurnId?: string | null;
}

/** First frame of every run: announces the context id (minted or given), the run id, and the ids of the turns it writes. */
export interface RunStartFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "run_start";
  agent: string;
  /** The `requestId` of the command that started the run. */
  requestId: string | null;
  /** The id the reply this run writes has in the transcript. */
  turnId: string | null;
  /** The id of the user's turn the run answers; null when it continues one (a decision). */
  userTurnId: string | null;
  /** The turn the run's first new turn follows on its branch: the last turn of the exchange before (or, continuing a reply, that reply's turn before it); null for the first message. A client whose view does not end with it has missed turns (another tab's) and loads the transcript again. */
  afterTurnId: string | null;
  /** True when the run first made another branch the one shown: the one its command named (a send's `afterTurnId`, a regenerate's `turnId`, the turn an edit replaces), left by the client while another tab switched, regenerated or edited. The exchanges that client shows may then have alternatives it does not know of: it loads the transcript again once the run is over. False otherwise (an older server omits it). */
  branchSwitched: boolean;
}

/** WebSocket: start a run, like `POST /agents/{agent}/runs`. */
export interface SendCommand {
  requestId?: string | null;
  type: "send";
  contextId?: string | null;
  messageId?: string | null;
  message: Message;
  data?: Record<string, unknown> | null;
  /** The last turn the client shows (any turn of that exchange): the message goes on the branch that ends there, the branch shown or another, which it then becomes (as if switched to), so a tab left on a branch another tab switched away from continues what its user sees. `branch_moved` (409, nothing recorded) when the conversation went on from that exchange, or was cleared, since. Omitted: after the branch shown. */
  afterTurnId?: string | null;
}

/** WebSocket: stop the run in progress, like `POST …/stop`. */
export interface StopCommand {
  requestId?: string | null;
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

/** Body of `POST /agents/{agent}/tickets`: a short-lived credential for one WebSocket handshake (`…/ws?ticket=…`), for clients that authenticate with headers, which a browser cannot put on a WebSocket. */
export interface Ticket {
  ticket: string;
  /** Seconds the ticket stays good for. */
  expiresIn: number;
}

/** The agent named the conversation. */
export interface TitleFrame {
  /** The conversation this frame belongs to. */
  contextId: string;
  /** The run that emitted this frame. */
  runId: string;
  /** Monotonic per context; the SSE `id:`. */
  seq: number;
  type: "title";
  title: string;
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
  title: string | null;
  turns: TranscriptTurn[];
  /** The run in progress, if any: attach to its events to follow it. */
  activeRunId: string | null;
  /** A decision the conversation waits for, if any. */
  pendingInterrupt: InterruptRequest | null;
  /** A page (`limit`) that does not reach the conversation's start: the exchanges before it are read with `before` set to its first turn's id. */
  hasEarlier: boolean;
}

/** One public turn of a conversation: what the user said or what the agent replied, with what it showed while it streamed. */
export interface TranscriptTurn {
  /** Stable for the life of the conversation. */
  id: string;
  role: "user" | "assistant";
  text: string;
  /** Tool names the agent called for this reply. */
  toolCalls: string[];
  /** Why the reply ended; null on user turns. */
  stopReason: "end" | "stopped" | "interrupted" | "error" | null;
  /** The public reasoning the reply showed. */
  thinking: string;
  /** The tools the reply called, in order. */
  activity: Activity[];
  meta: TurnMeta;
  /** On a reply that asked a person for a decision: what it asked and how that ended; null on every other turn. */
  asked: TurnAsked | null;
  /** Alternatives at this point of the conversation (regenerated replies, edited messages); 1 when there are none. */
  siblings: number;
  /** Which of them this branch shows. */
  siblingIndex: number;
}

/** The decision a reply asked a person for, and how that ended: the record of what the user decided, kept after the question is no longer pending. */
export interface TurnAsked {
  /** What the reply asked, as its `interrupt` frame carried it. */
  request: InterruptRequest;
  /** `waiting`: no answer yet; `answered`: see `decision`; `stopped`: the run was stopped while it waited, unanswered. */
  status: "waiting" | "answered" | "stopped";
  /** The person's answer, once `answered`; null otherwise. */
  decision: unknown;
}

/** When a turn started and finished; the model and its tokens only when the agent made them public. */
export interface TurnMeta {
  startedAt: number | null;
  finishedAt: number | null;
  model: string | null;
  usage: TurnUsage | null;
}

export interface TurnUsage {
  inputTokens: number;
  outputTokens: number;
}

/** Every frame the server sends, discriminated by `type`. */
export type Frame =
  | RunStartFrame
  | TitleFrame
  | ThinkingFrame
  | ToolCallFrame
  | ToolResultFrame
  | TokenFrame
  | InterruptFrame
  | DoneFrame
  | ErrorFrame
  | RejectedFrame;

/** Every WebSocket command a client sends, discriminated by `type`. */
export type Command =
  | SendCommand
  | AttachCommand
  | StopCommand
  | DecideCommand
  | EditCommand
  | RegenerateCommand;

export type FrameType = Frame["type"];
export type StopReason = DoneFrame["stopReason"];

/** The WebSocket subprotocol: the protocol version, where a browser cannot send headers. */
export const WEBSOCKET_SUBPROTOCOL = "thinwire.v1";

/** The same protocol with several frames to a message, one per line: offered first. */
export const WEBSOCKET_SUBPROTOCOL_LINES = "thinwire.v1.lines";

/** The most exchanges one page of a transcript holds (`GET …/contexts/{id}?limit=`). */
export const MAX_TRANSCRIPT_PAGE = 1000;

/** Every frame type of this protocol version; a client ignores any other. */
export const FRAME_TYPES: readonly FrameType[] = ["run_start", "title", "thinking", "tool_call", "tool_result", "token", "interrupt", "done", "error", "rejected"];

export const STOP_REASONS: readonly StopReason[] = ["end", "stopped", "interrupted", "error"];

/** Error codes the server sends. */
export type ServerErrorCode =
  | "agent_error"
  | "agent_not_found"
  | "binary_not_supported"
  | "body_too_large"
  | "branch_moved"
  | "branch_not_found"
  | "context_busy"
  | "context_not_found"
  | "data_too_large"
  | "decision_pending"
  | "host_not_allowed"
  | "http_error"
  | "internal_error"
  | "interrupt_answered"
  | "interrupt_not_found"
  | "invalid_context_id"
  | "invalid_decision"
  | "invalid_json"
  | "invalid_request"
  | "invalid_state_value"
  | "message_already_sent"
  | "message_too_large"
  | "method_not_allowed"
  | "no_run"
  | "not_a_user_turn"
  | "not_found"
  | "nothing_to_regenerate"
  | "origin_not_allowed"
  | "protocol_mismatch"
  | "rate_limited"
  | "request_timeout"
  | "run_interrupted"
  | "run_too_long"
  | "server_busy"
  | "store_error"
  | "store_unavailable"
  | "title_too_long"
  | "too_many_branches"
  | "too_many_runs"
  | "too_many_streams"
  | "turn_not_found"
  | "unauthenticated"
  | "unauthorized"
  | "unsupported_media_type"
  | "version_conflict"
  | "version_mismatch"
  | "write_denied";

/** Error codes the client raises by itself. */
export type ClientErrorCode =
  | "aborted"
  | "disposed"
  | "invalid_url"
  | "network_error"
  | "no_pending_interrupt"
  | "protocol_error"
  | "run_failed"
  | "stream_interrupted"
  | "websocket_unavailable";

/** Every error code a client can meet. */
export type ErrorCode = ServerErrorCode | ClientErrorCode;

/** What each error code means. */
export const ERROR_CODES: Readonly<Record<ErrorCode, string>> = {
  aborted: "reset() or dispose() cancelled the work.",
  agent_error: "The agent failed; the message names a reference to the server log.",
  agent_not_found: "No agent of that name is served here.",
  binary_not_supported: "WebSocket messages must be JSON text.",
  body_too_large: "The request body or WebSocket message exceeds the size limit.",
  branch_moved: "The conversation moved on from the turn this follows (another tab added to it, or cleared it): load the transcript and send again.",
  branch_not_found: "No alternative of that index at that turn.",
  context_busy: "Another run or change holds the conversation; try again.",
  context_not_found: "No such conversation for this agent and caller.",
  data_too_large: "The data sent with a message exceeds the size limit.",
  decision_pending: "The conversation waits for a decision; answer it first.",
  disposed: "The client was used after dispose().",
  host_not_allowed: "This server does not answer to that host name.",
  http_error: "An HTTP error without a more specific code.",
  internal_error: "The server failed; nothing the client did.",
  interrupt_answered: "That interrupt was answered already.",
  interrupt_not_found: "No such pending interrupt.",
  invalid_context_id: "A context id is 'ctx-' followed by 36 lowercase hex digits.",
  invalid_decision: "The decision is not one of the options or does not fit the schema.",
  invalid_json: "The body or message is not valid JSON.",
  invalid_request: "The request does not fit its schema.",
  invalid_state_value: "An AgentState value is not JSON or is too large, or its key no name.",
  invalid_url: "No URL can be resolved from the options: give an absolute baseUrl.",
  message_already_sent: "That message was sent already; its reply is in the transcript.",
  message_too_large: "The user message exceeds the size limit.",
  method_not_allowed: "That method is not allowed on this route.",
  network_error: "The request or the stream failed below HTTP.",
  no_pending_interrupt: "decide() was called with no decision pending.",
  no_run: "There is no run to attach to.",
  not_a_user_turn: "Only a user's turn can be edited.",
  not_found: "No such route.",
  nothing_to_regenerate: "The conversation has no reply to regenerate.",
  origin_not_allowed: "A page of another site may not act with this site's credentials.",
  protocol_error: "The server sent something that is not a frame.",
  protocol_mismatch: "Client and server speak different protocol versions.",
  rate_limited: "Too many runs started; try again shortly.",
  request_timeout: "The request body did not arrive in time.",
  run_failed: "The run ended with stop reason error and no error frame.",
  run_interrupted: "The run's server stopped before the run ended; send it again.",
  run_too_long: "The run sent more frames than one run may.",
  server_busy: "The server has all the connections it takes; try again shortly.",
  store_error: "The run's reply could not be saved.",
  store_unavailable: "The store did not answer; try again shortly.",
  stream_interrupted: "The stream ended before its done frame.",
  title_too_long: "A title is at most 200 characters.",
  too_many_branches: "The conversation made as many branches as one may (65,536): start a new one.",
  too_many_runs: "Too many runs in progress at once; try again when one ends.",
  too_many_streams: "Too many streams open at once.",
  turn_not_found: "No such turn on the conversation's current branch.",
  unauthenticated: "Sign in to talk to this agent.",
  unauthorized: "The operator API needs its bearer token.",
  unsupported_media_type: "Send the body as application/json.",
  version_conflict: "Someone else changed the conversation meanwhile.",
  version_mismatch: "The If-Match version is not the current one.",
  websocket_unavailable: "This environment has no WebSocket; pass one to WebSocketTransport.",
  write_denied: "Those AgentState keys are not writable.",
};

/** Codes for which the same request may succeed when tried again later. */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set(["context_busy", "network_error", "rate_limited", "run_interrupted", "server_busy", "store_error", "store_unavailable", "stream_interrupted", "too_many_runs", "too_many_streams"]);

/** The WebSocket close codes the server uses, with the error a client reports for each. */
export const CLOSE_CODES: Readonly<Record<number, ErrorCode>> = {
  1002: "protocol_mismatch",
  1003: "binary_not_supported",
  1007: "invalid_json",
  1009: "body_too_large",
  1011: "internal_error",
  1012: "network_error",
  1013: "network_error",
  4401: "unauthenticated",
  4403: "origin_not_allowed",
  4404: "agent_not_found",
  4429: "too_many_streams",
};
