/**
 * The view a client shows: the reducer state behind its snapshot, and the
 * changes the jobs make to it (open a reply, show a failure, …). Every change
 * goes through `commit`, which hands it to the client to announce; a closed
 * view (a disposed client) changes no more.
 */
import { errorInfo, type ThinwireError } from "./errors.js";
import type { InterruptRequest, StopReason } from "./generated/wire.js";
import { initialReducerState, type ReducerState } from "./reduce.js";
import { emptySnapshot, type Snapshot, type Status, type Turn } from "./snapshot.js";

export interface CommitOptions {
  /** Tell `onContext` when the conversation id changed (default true). */
  announceContext?: boolean;
  /** A streaming frame: its notification may wait for the scheduled flush (default false). */
  batch?: boolean;
}

/** Called with every change the view makes. */
export type ViewListener = (previous: ReducerState, next: ReducerState, options: Required<CommitOptions>) => void;

export class View {
  #state: ReducerState;
  #turnCount = 0;
  #closed = false;
  readonly #listener: ViewListener;

  constructor(contextId: string | null, listener: ViewListener) {
    this.#state = initialReducerState(emptySnapshot(contextId));
    this.#listener = listener;
  }

  get state(): ReducerState {
    return this.#state;
  }

  get snapshot(): Snapshot {
    return this.#state.snapshot;
  }

  /** Makes `next` the state, unless it is the current one or the view is closed. */
  commit(next: ReducerState, { announceContext = true, batch = false }: CommitOptions = {}): void {
    const previous = this.#state;
    if (next === previous || this.#closed) return;
    this.#state = next;
    this.#listener(previous, next, { announceContext, batch });
  }

  /** Shows `changes` over the current snapshot, in a new one. */
  show(changes: Partial<Snapshot>): void {
    const state = this.#state;
    this.commit({ ...state, snapshot: { ...state.snapshot, ...changes } });
  }

  setStatus(status: Status): void {
    if (this.#state.snapshot.status !== status) this.show({ status });
  }

  /** An empty conversation; `announceContext` as in `commit`. */
  clear(announceContext = true): void {
    this.commit(initialReducerState(emptySnapshot(null)), { announceContext });
  }

  /** A new turn with an id unique within the view. */
  turn(
    role: Turn["role"],
    text: string,
    streaming: boolean,
    toolCalls: readonly string[] = [],
    stopReason: StopReason | null = null,
  ): Turn {
    this.#turnCount += 1;
    return { id: `${role}-${this.#turnCount}`, role, text, toolCalls, streaming, stopReason };
  }

  /**
   * Shows `turns` followed by a fresh, empty assistant reply, streaming, with the
   * previous run's thinking, activity and error cleared; returns the reply.
   * `run` sets the run being read and the pending interrupt (the current ones
   * by default).
   */
  openReply(
    turns: readonly Turn[],
    run: { runId?: string | null; lastSeq?: number | null; interrupt?: InterruptRequest | null } = {},
  ): Turn {
    const reply = this.turn("assistant", "", true);
    const state = this.#state;
    this.commit({
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

  /**
   * Shows a failed run. A request that produced no frame leaves no trace but
   * the error (`dropUserId` set); otherwise the partial reply is kept, closed.
   * `interrupt`, when given, becomes the pending one.
   */
  failRun(
    error: ThinwireError,
    dropUserId: string | null,
    replyId: string,
    interrupt: InterruptRequest | null = this.#state.snapshot.interrupt,
  ): void {
    const turns = this.#state.snapshot.turns.flatMap((turn): Turn[] => {
      if (turn.id === dropUserId) return [];
      if (turn.id !== replyId) return [turn];
      if (dropUserId !== null || turn.text === "") return [];
      return [{ ...turn, streaming: false }];
    });
    this.show({ turns, interrupt, status: "error", error: errorInfo(error) });
  }

  /** No change is made or announced any more. */
  close(): void {
    this.#closed = true;
  }
}
