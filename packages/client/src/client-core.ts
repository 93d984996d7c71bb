/**
 * What the AgentClient modules share: the client's internals as a small
 * interface (`ClientCore`), the jobs it reads runs with, and the view updates
 * every run path makes. Internal; only `SendResult` is public.
 *
 * The core hands out getters, not values: the state moves on at every await,
 * so a helper always reads it afresh.
 */
import type { ThinwireError } from "./errors.js";
import type { InterruptRequest, StopReason } from "./generated/wire.js";
import type { ReconnectOptions } from "./reconnect.js";
import type { ReducerState } from "./reduce.js";
import type { AgentErrorInfo, Status, Turn } from "./snapshot.js";
import type { Transport, TransportTarget } from "./transport.js";

export interface SendResult {
  text: string;
  toolCalls: string[];
  contextId: string;
  runId: string;
  stopReason: StopReason;
}

/** A run the client is reading: its own send, or one it found running on resume. */
export interface Job {
  readonly controller: AbortController;
  /** The server has announced the run, so a stop can name it. */
  runKnown: boolean;
  /** `stop()` calls made before the run was known. */
  stops: Array<{ resolve: () => void; reject: (error: unknown) => void }>;
}

export interface ClientCore {
  readonly transport: Transport;
  readonly fetch: typeof fetch;
  readonly reconnect: Required<ReconnectOptions>;
  state(): ReducerState;
  /** Makes `next` the state and notifies; `batch` lets a streaming frame wait for the scheduled flush. */
  commit(next: ReducerState, announceContext?: boolean, batch?: boolean): void;
  /** The job being read: the run found on resume, else the send in flight. */
  running(): Job | null;
  /** A new turn with an id unique within the client. */
  turn(
    role: Turn["role"],
    text: string,
    streaming: boolean,
    toolCalls?: readonly string[],
    stopReason?: StopReason | null,
  ): Turn;
  target(): TransportTarget;
  headers(): Record<string, string>;
}

export function newJob(): Job {
  return { controller: new AbortController(), runKnown: false, stops: [] };
}

/** A job that ended before its run was known has nothing left to stop. */
export function settleStops(job: Job): void {
  for (const stop of job.stops.splice(0)) stop.resolve();
}

/**
 * Shows `turns` followed by a fresh, empty assistant reply, streaming, with the
 * previous run's thinking, activity and error cleared; returns the reply.
 * `run` sets the run being read and the pending interrupt (the current ones
 * by default).
 */
export function openReply(
  core: ClientCore,
  turns: readonly Turn[],
  run: { runId?: string | null; lastSeq?: number | null; interrupt?: InterruptRequest | null } = {},
): Turn {
  const reply = core.turn("assistant", "", true);
  const state = core.state();
  core.commit({
    runId: run.runId === undefined ? state.runId : run.runId,
    lastSeq: run.lastSeq === undefined ? state.lastSeq : run.lastSeq,
    snapshot: {
      ...state.snapshot,
      turns: [...turns, reply],
      thinking: "",
      activity: [],
      error: null,
      status: "streaming",
      interrupt: run.interrupt === undefined ? state.snapshot.interrupt : run.interrupt,
    },
  });
  return reply;
}

export function setStatus(core: ClientCore, status: Status): void {
  const state = core.state();
  if (state.snapshot.status === status) return;
  core.commit({ ...state, snapshot: { ...state.snapshot, status } });
}

/**
 * Shows a failed run. A request that produced no frame leaves no trace but
 * the error (`dropUserId` set); otherwise the partial reply is kept, closed.
 * `interrupt`, when given, becomes the pending one.
 */
export function failRun(
  core: ClientCore,
  error: ThinwireError,
  dropUserId: string | null,
  replyId: string,
  interrupt: InterruptRequest | null = core.state().snapshot.interrupt,
): void {
  const state = core.state();
  const turns = state.snapshot.turns.flatMap((turn): Turn[] => {
    if (turn.id === dropUserId) return [];
    if (turn.id !== replyId) return [turn];
    if (dropUserId !== null || turn.text === "") return [];
    return [{ ...turn, streaming: false }];
  });
  core.commit({
    ...state,
    snapshot: { ...state.snapshot, turns, interrupt, status: "error", error: errorInfo(error) },
  });
}

export function errorInfo(error: ThinwireError): AgentErrorInfo {
  return { code: error.code, message: error.message, retryable: error.retryable };
}
