/**
 * The view a client shows: the reducer state behind its snapshot, and the
 * changes the jobs make to it (open a reply, show a failure, …). Every change
 * goes through `commit`, which hands it to the client to announce; a closed
 * view (a disposed client) changes no more.
 */
import { errorInfo, type ThinwireError } from "./errors.js";
import type { InterruptRequest } from "./generated/wire.js";
import { initialReducerState, type ReducerState } from "./reduce.js";
import { type AgentErrorInfo, emptySnapshot, NO_META, type Snapshot, type Status, type Turn } from "./snapshot.js";

export interface CommitOptions {
  /** Tell `onContext` when the conversation id changed (default true). */
  announceContext?: boolean;
  /** A streaming frame: its notification may wait for the scheduled flush (default false). */
  batch?: boolean;
  /** The conversation shown is gone from the server, and forgotten (default false). */
  forgets?: boolean;
}

/** Called with every change the view makes. */
export type ViewListener = (previous: ReducerState, next: ReducerState, options: Required<CommitOptions>) => void;

export class View {
  #state: ReducerState;
  #turnCount = 0;
  #titleChanges = 0;
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

  /** How many times the title shown changed: a caller compares it to tell whether it did meanwhile. */
  get titleChanges(): number {
    return this.#titleChanges;
  }

  /** Makes `next` the state, unless it is the current one or the view is closed. */
  commit(next: ReducerState, { announceContext = true, batch = false, forgets = false }: CommitOptions = {}): void {
    const previous = this.#state;
    if (next === previous || this.#closed) return;
    if (next.snapshot.title !== previous.snapshot.title) this.#titleChanges += 1;
    this.#state = next;
    this.#listener(previous, next, { announceContext, batch, forgets });
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

  /**
   * Forgets the conversation shown, which the server says is gone (deleted
   * elsewhere) or never was: an empty view under no id, with `changes` (the
   * error shown), announced as a forget (`forgets`).
   */
  forget(changes: Partial<Snapshot> = {}): void {
    this.commit(initialReducerState({ ...emptySnapshot(null), ...changes }), { forgets: true });
  }

  /** A new turn with a provisional id, unique within the view; `fields` override the defaults of a fresh turn. */
  turn(role: Turn["role"], text: string, fields: Partial<Omit<Turn, "role" | "text">> = {}): Turn {
    this.#turnCount += 1;
    return {
      id: `${role}-${this.#turnCount}`,
      role,
      text,
      toolCalls: [],
      streaming: false,
      stopReason: null,
      thinking: "",
      activity: [],
      meta: NO_META,
      asked: null,
      siblings: 1,
      siblingIndex: 0,
      ...fields,
    };
  }

  /**
   * Shows `turns` followed by a fresh, empty assistant reply, streaming, with the
   * previous run's thinking, activity and error cleared. `run` sets the run
   * being read, the pending interrupt and whether exchanges precede `turns`
   * (the current ones by default), and the error shown (none by default). The
   * reply is of the exchange of the last of `turns` — the message it answers,
   * or the reply a decision continues — and carries its numbers among the
   * alternatives. Its id is provisional: the run's `run_start` replaces it
   * with the server's, so nothing addresses the reply by it (see `failRun`).
   */
  openReply(
    turns: readonly Turn[],
    run: {
      runId?: string | null;
      lastSeq?: number | null;
      interrupt?: InterruptRequest | null;
      hasEarlier?: boolean;
      error?: AgentErrorInfo | null;
    } = {},
  ): void {
    const last = turns[turns.length - 1];
    const exchange = last ? { siblings: last.siblings, siblingIndex: last.siblingIndex } : {};
    const reply = this.turn("assistant", "", { streaming: true, ...exchange });
    const state = this.#state;
    this.commit({
      runId: run.runId === undefined ? state.runId : run.runId,
      lastSeq: run.lastSeq === undefined ? state.lastSeq : run.lastSeq,
      snapshot: {
        ...state.snapshot,
        turns: [...turns, reply],
        thinking: "",
        activity: [],
        error: run.error ?? null,
        status: "streaming",
        interrupt: run.interrupt === undefined ? state.snapshot.interrupt : run.interrupt,
        hasEarlier: run.hasEarlier ?? state.snapshot.hasEarlier,
      },
    });
  }

  /**
   * Shows a failed run: the partial reply is kept, closed (dropped when
   * empty) — found as the turn still streaming, not by the id `openReply`
   * gave it, which the run's `run_start` may have replaced with the server's.
   * Its stop reason stays null: the client stopped following the run, which
   * may go on on the server, and only the transcript knows how it ended.
   * `restore`: the request produced no frame, so it leaves no trace but the
   * error — these turns, shown before it, come back, after the earlier ones
   * loaded meanwhile. `interrupt`, when given, becomes the pending one. A
   * conversation gone from the server is forgotten instead (see `fail`).
   */
  failRun(
    error: ThinwireError,
    { restore, interrupt = this.#state.snapshot.interrupt }: { restore?: readonly Turn[]; interrupt?: InterruptRequest | null } = {},
  ): void {
    const turns = restore
      ? this.#withEarlier(restore)
      : this.#state.snapshot.turns.flatMap((turn): Turn[] => {
          if (!turn.streaming) return [turn];
          return turn.text === "" ? [] : [{ ...turn, streaming: false }];
        });
    this.fail(error, { turns, interrupt });
  }

  /**
   * Shows `error` (status `error`) with `changes`. A request refused because
   * the conversation is gone from the server (`context_not_found`: deleted in
   * another tab, say) forgets it instead, as a load of an id the server does
   * not know does — an empty view under no id (`onContext` hears of it), the
   * error shown — so the next send starts a new conversation.
   */
  fail(error: ThinwireError, changes: Partial<Snapshot> = {}): void {
    if (error.code === "context_not_found") {
      this.forget({ status: "error", error: errorInfo(error) });
      return;
    }
    this.show({ ...changes, status: "error", error: errorInfo(error) });
  }

  /** `turns`, after those shown before its first one: the earlier pages `loadEarlier()` added since they were shown. */
  #withEarlier(turns: readonly Turn[]): readonly Turn[] {
    const first = turns[0];
    const shown = this.#state.snapshot.turns;
    const index = first ? shown.findIndex((turn) => turn.id === first.id) : -1;
    return index > 0 ? [...shown.slice(0, index), ...turns] : turns;
  }

  /** No change is made or announced any more. */
  close(): void {
    this.#closed = true;
  }
}
