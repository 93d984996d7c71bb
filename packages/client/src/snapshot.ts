/** The view state a UI renders. Every change makes a new object; nothing is mutated. */
import type { ErrorCode, InterruptRequest, StopReason, TurnAsked, TurnMeta } from "./generated/wire.js";

/**
 * `reconnecting`: the stream of the run broke and the client is attaching to it
 * again; the run goes on on the server meanwhile.
 */
export type Status = "idle" | "hydrating" | "streaming" | "reconnecting" | "error";

/**
 * Why a reply ended, as a turn shows it: the server's stop reason, or
 * `detached` — the client's, never the server's: this client stopped following
 * the run before its end (its stream could not be reattached, status `error`).
 * The run may go on on the server; the transcript (a reload) says how it ended.
 */
export type TurnStopReason = StopReason | "detached";

export interface Turn {
  /**
   * The server's id of the turn: stable for the life of the conversation, the
   * same in a stream and in the transcript after a reload, so it serves as a
   * React key and names the turn for `edit()` and `switchBranch()`. A turn
   * sent from this view has a provisional id until its run's first frame
   * announces the server's.
   */
  id: string;
  role: "user" | "assistant";
  text: string;
  /** Tool names the agent called for this reply, in call order. */
  toolCalls: readonly string[];
  /** True while the reply is still arriving. */
  streaming: boolean;
  /**
   * Why the reply ended; null on user turns and while streaming. `interrupted`:
   * the run stopped to ask a person (see `Snapshot.interrupt`), or its server died.
   * `detached` (the client's own, see `TurnStopReason`) on a reply whose stream
   * could not be reattached.
   */
  stopReason: TurnStopReason | null;
  /** The public reasoning this reply showed, live while it streams; "" on user turns. */
  thinking: string;
  /** The tools this reply called, in call order, live while it streams; empty on user turns. */
  activity: readonly Activity[];
  /**
   * When the turn started and finished; the model and its token usage only
   * when the agent made them public. Read from the transcript: every field is
   * null on a turn streamed in this view until the transcript is loaded again.
   */
  meta: TurnMeta;
  /**
   * On a reply that asked a person for a decision: what it asked (`request`)
   * and how that ended — `waiting`, `answered` (with the person's `decision`,
   * shown as soon as `decide()` sends it) or `stopped` (unanswered). Kept in the
   * transcript, so it is still there after a reload; null on every other turn.
   */
  asked: TurnAsked | null;
  /** How many alternatives exist at this exchange (regenerated replies, edited messages); 1 when none. */
  siblings: number;
  /** Which alternative this branch shows, from 0; both turns of an exchange carry the same numbers. */
  siblingIndex: number;
}

/**
 * A tool call: of the latest run (`Snapshot.activity`) or of one reply
 * (`Turn.activity`). `running`: started, no result yet — in a reply that
 * ended, a tool whose run never saw it finish.
 */
export interface Activity {
  callId: string;
  name: string;
  state: "running" | "ok" | "error";
}

export interface AgentErrorInfo {
  /** One of `ErrorCode`, or a code of a newer server. */
  code: ErrorCode | (string & {});
  message: string;
  retryable: boolean;
}

export interface Snapshot {
  turns: readonly Turn[];
  /**
   * The public reasoning of the latest run this view read, live while it
   * streams; kept once it ends, for a live panel. A new conversation (`open()`,
   * `reset()`) and a branch switch show none: the run may be off the branch
   * shown, and each reply keeps its own (`Turn.thinking`).
   */
  thinking: string;
  /** The tool calls of that run, likewise (`Turn.activity` keeps each reply's). */
  activity: readonly Activity[];
  status: Status;
  error: AgentErrorInfo | null;
  /** The only thing the client remembers about the conversation. */
  contextId: string | null;
  /** The decision the conversation waits for (answer it with `decide()`); null when none is pending. */
  interrupt: InterruptRequest | null;
  /**
   * The conversation's title: from the transcript, a `title` frame (the agent
   * named it), a rename, or a page of a `ConversationList` that follows this
   * client (a rename made elsewhere); null when it has none. The title the
   * server takes from a message comes with no frame: a run that ends without a
   * title shown loads the transcript for it. Editing the first message keeps
   * the title (the server takes one from a message only when there is none).
   */
  title: string | null;
  /**
   * Exchanges precede the first turn shown: the transcript was loaded a page
   * at a time (`pageSize`), and `loadEarlier()` shows the page before.
   */
  hasEarlier: boolean;
}

export function emptySnapshot(contextId: string | null = null): Snapshot {
  return {
    turns: [],
    thinking: "",
    activity: [],
    status: "idle",
    error: null,
    contextId,
    interrupt: null,
    title: null,
    hasEarlier: false,
  };
}

/** The meta of a turn the transcript has not described yet. */
export const NO_META: TurnMeta = Object.freeze({ startedAt: null, finishedAt: null, model: null, usage: null });

/**
 * The status and error of a view whose run ended with `stopReason`, seen in a
 * `done` frame or in the transcript: a failed run shows an error, `run_failed`
 * when no `error` frame said more.
 */
export function runEnded(snapshot: Snapshot, stopReason: StopReason): Pick<Snapshot, "status" | "error"> {
  if (stopReason !== "error") return { status: "idle", error: snapshot.error };
  return { status: "error", error: snapshot.error ?? { code: "run_failed", message: "The run failed.", retryable: false } };
}
