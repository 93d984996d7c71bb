/**
 * The view a client shows: the reducer state behind its snapshot, and the
 * changes the jobs make to it (open a reply, show a failure, …). Every change
 * goes through `commit`, which hands it to the client to announce — but the
 * deltas a streaming reply grows by (`append`), which are announced as they
 * come and built into a snapshot when it is next read; a closed view (a
 * disposed client) changes no more.
 */
import { errorInfo, type ThinwireError } from "./errors.js";
import type { Frame, InterruptRequest } from "./generated/wire.js";
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

/** What `append` added to the streaming reply since `#state` was built. */
interface Deltas {
  text: string;
  thinking: string;
  lastSeq: number | null;
}

export class View {
  /** The state as last built: without the `#deltas`, which every read adds first. */
  #state: ReducerState;
  #deltas: Deltas | null = null;
  #turnCount = 0;
  #titleChanges = 0;
  #closed = false;
  readonly #listener: ViewListener;
  readonly #appended: () => void;

  /** `listener` hears of every commit; `appended` of every delta `append` adds (a streaming frame's change). */
  constructor(contextId: string | null, listener: ViewListener, appended: () => void) {
    this.#state = initialReducerState(emptySnapshot(contextId));
    this.#listener = listener;
    this.#appended = appended;
  }

  get state(): ReducerState {
    if (this.#deltas !== null) this.#settle(this.#deltas);
    return this.#state;
  }

  get snapshot(): Snapshot {
    return this.state.snapshot;
  }

  /**
   * Adds a `token` or `thinking` frame of the run being read to its streaming
   * reply, as `reduceFrame` would, without building a snapshot: the next read
   * of `state` or `snapshot` does, once for every delta since. So a burst of
   * tokens between two renders costs their length, not a copy of every turn
   * each — what a long conversation would pay. False, changing nothing, for
   * any other frame, and for one that does more than add (a duplicate, the
   * first after a reconnect, …): `reduceFrame` takes those.
   */
  append(frame: Frame): boolean {
    if (frame.type !== "token" && frame.type !== "thinking") return false;
    const { runId, lastSeq, snapshot } = this.#state;
    const deltas = this.#deltas ?? { text: "", thinking: "", lastSeq };
    const reply = snapshot.turns[snapshot.turns.length - 1];
    const adds =
      !this.#closed &&
      runId !== null &&
      frame.runId === runId &&
      frame.contextId === snapshot.contextId &&
      snapshot.status === "streaming" &&
      reply?.role === "assistant" &&
      reply.streaming &&
      !(typeof frame.seq === "number" && deltas.lastSeq !== null && frame.seq <= deltas.lastSeq);
    if (!adds) return false;
    if (frame.type === "token") deltas.text += frame.delta;
    else deltas.thinking += frame.delta;
    if (typeof frame.seq === "number") deltas.lastSeq = frame.seq;
    this.#deltas = deltas;
    this.#appended();
    return true;
  }

  /** Builds the state with the `deltas` added: the reply, the turns and the snapshot new, the other turns the same. */
  #settle(deltas: Deltas): void {
    this.#deltas = null;
    const state = this.#state;
    const turns = state.snapshot.turns.slice();
    const reply = turns[turns.length - 1]!;
    turns[turns.length - 1] = { ...reply, text: reply.text + deltas.text, thinking: reply.thinking + deltas.thinking };
    const thinking = state.snapshot.thinking + deltas.thinking;
    this.#state = { ...state, lastSeq: deltas.lastSeq, snapshot: { ...state.snapshot, thinking, turns } };
  }

  /** How many times the title shown changed: a caller compares it to tell whether it did meanwhile. */
  get titleChanges(): number {
    return this.#titleChanges;
  }

  /** Makes `next` the state, unless it is the current one or the view is closed. */
  commit(next: ReducerState, { announceContext = true, batch = false, forgets = false }: CommitOptions = {}): void {
    const previous = this.state;
    if (next === previous || this.#closed) return;
    if (next.snapshot.title !== previous.snapshot.title) this.#titleChanges += 1;
    this.#state = next;
    this.#listener(previous, next, { announceContext, batch, forgets });
  }

  /** Shows `changes` over the current snapshot, in a new one. */
  show(changes: Partial<Snapshot>): void {
    const state = this.state;
    this.commit({ ...state, snapshot: { ...state.snapshot, ...changes } });
  }

  setStatus(status: Status): void {
    if (this.#state.snapshot.status !== status) this.show({ status }); // no delta changes the status
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
    const state = this.state;
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
   * Its stop reason is `detached`: the client stopped following the run, which
   * may go on on the server, and only the transcript knows how it ended.
   * `restore`: the request produced no frame, so it leaves no trace but the
   * error — these turns, shown before it, come back, after the earlier ones
   * loaded meanwhile. `interrupt`, when given, becomes the pending one. A
   * conversation gone from the server is forgotten instead (see `fail`).
   */
  failRun(
    error: ThinwireError,
    { restore, interrupt = this.snapshot.interrupt }: { restore?: readonly Turn[]; interrupt?: InterruptRequest | null } = {},
  ): void {
    const turns = restore
      ? this.#withEarlier(restore)
      : this.snapshot.turns.flatMap((turn): Turn[] => {
          if (!turn.streaming) return [turn];
          return turn.text === "" ? [] : [{ ...turn, streaming: false, stopReason: "detached" }];
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
    const shown = this.snapshot.turns;
    const index = first ? shown.findIndex((turn) => turn.id === first.id) : -1;
    return index > 0 ? [...shown.slice(0, index), ...turns] : turns;
  }

  /** No change is made or announced any more. */
  close(): void {
    this.#closed = true;
  }
}
