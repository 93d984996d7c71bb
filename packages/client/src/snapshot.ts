/** The view state a UI renders. Every change makes a new object; nothing is mutated. */
import type { ErrorCode, InterruptRequest, StopReason } from "./generated/wire.js";

/**
 * `reconnecting`: the stream of the run broke and the client is attaching to it
 * again; the run goes on on the server meanwhile.
 */
export type Status = "idle" | "hydrating" | "streaming" | "reconnecting" | "error";

export interface Turn {
  /** Stable within one client, for React keys. */
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
   */
  stopReason: StopReason | null;
}

/** A tool call of the current run. */
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
  /** The public reasoning of the current run. */
  thinking: string;
  activity: readonly Activity[];
  status: Status;
  error: AgentErrorInfo | null;
  /** The only thing the client remembers about the conversation. */
  contextId: string | null;
  /** The decision the conversation waits for (answer it with `decide()`); null when none is pending. */
  interrupt: InterruptRequest | null;
}

export function emptySnapshot(contextId: string | null = null): Snapshot {
  return { turns: [], thinking: "", activity: [], status: "idle", error: null, contextId, interrupt: null };
}

/**
 * The status and error of a view whose run ended with `stopReason`, seen in a
 * `done` frame or in the transcript: a failed run shows an error, `run_failed`
 * when no `error` frame said more.
 */
export function runEnded(snapshot: Snapshot, stopReason: StopReason): Pick<Snapshot, "status" | "error"> {
  if (stopReason !== "error") return { status: "idle", error: snapshot.error };
  return { status: "error", error: snapshot.error ?? { code: "run_failed", message: "The run failed.", retryable: false } };
}
