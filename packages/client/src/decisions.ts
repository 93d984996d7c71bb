/**
 * Decisions: answering the pending interrupt, or ending the run that waits for it.
 *
 * The interrupt leaves the view as soon as the answer goes out, and the reply
 * that asked shows the answer (`Turn.asked`), as the transcript will. A
 * refusal before the continued run began puts both back, unless the server
 * says the interrupt is gone (answered elsewhere, expired): then the
 * transcript is loaded again, since the view no longer matches the server —
 * and the run another tab's answer continued, when it still goes on, is
 * followed (see `TranscriptLoader.refresh`). The refusal stays shown either
 * way: beside the run followed, or over what the conversation holds.
 *
 * A decision, and the stop of a waiting run, make their request once this
 * client's own requests that hold the conversation are answered (`Holds`).
 */
import { aborted, toThinwireError } from "./errors.js";
import type { InterruptRequest, TurnAsked } from "./generated/wire.js";
import type { Holds } from "./holds.js";
import type { Job } from "./job.js";
import type { RunReader } from "./run-reader.js";
import type { SendResult } from "./send-result.js";
import type { Turn } from "./snapshot.js";
import type { TranscriptLoader } from "./transcript-loader.js";
import type { Transport, TransportTarget } from "./transport.js";
import type { View } from "./view.js";

export interface DecisionsOptions {
  transport: Transport;
  /** Read at each request, so changed headers are picked up. */
  target: () => TransportTarget;
  view: View;
  reader: RunReader;
  transcripts: TranscriptLoader;
  /** This client's requests that hold the conversation on the server: a decision and a stop wait for them. */
  holds: Holds;
}

export class Decisions {
  readonly #transport: Transport;
  readonly #target: () => TransportTarget;
  readonly #view: View;
  readonly #reader: RunReader;
  readonly #transcripts: TranscriptLoader;
  readonly #holds: Holds;

  constructor(options: DecisionsOptions) {
    this.#transport = options.transport;
    this.#target = options.target;
    this.#view = options.view;
    this.#reader = options.reader;
    this.#transcripts = options.transcripts;
    this.#holds = options.holds;
  }

  /** Sends the decision and follows the run it continues, in a fresh reply. */
  async answer(contextId: string, interrupt: InterruptRequest, value: unknown, job: Job): Promise<SendResult> {
    const view = this.#view;
    const signal = job.signal;
    const before = view.snapshot.turns;
    const answered = withAsked(before, { request: interrupt, status: "answered", decision: value });
    view.openReply(answered, { runId: null, interrupt: null });
    const { interruptId } = interrupt;
    try {
      await this.#holds.released(signal);
      const frames = (stream: AbortSignal) =>
        this.#transport.decide({ ...this.#target(), contextId, interruptId, value, signal: stream });
      return await this.#reader.follow(frames, job);
    } catch (caught) {
      if (signal.aborted) throw aborted(caught);
      const error = toThinwireError(caught);
      if (job.runKnown) {
        view.failRun(error);
        throw error;
      }
      // Refused before the continued run began: the question is still open, unless the server says it is gone.
      const gone = error.code === "interrupt_answered" || error.code === "interrupt_not_found";
      view.failRun(error, gone ? { interrupt: null } : { interrupt, restore: before });
      if (gone) {
        // Answered elsewhere, or expired: show what the conversation holds, and follow the run
        // another tab's answer continued if it still goes on — the error kept beside it either
        // way, as for a message refused `context_busy`.
        await this.#transcripts.refresh(contextId, signal, () => !job.superseded, { keepError: true });
        if (signal.aborted) throw aborted(caught);
      }
      throw error;
    }
  }

  /**
   * A stop while a decision is pending: the server ends the waiting run with an
   * empty `stopped` reply. The view changes only while `idle()` holds: a send
   * started meanwhile owns it.
   */
  async endWaitingRun(contextId: string, signal: AbortSignal, idle: () => boolean): Promise<void> {
    await this.#holds.released(signal);
    // The server holds the conversation to end the run: a decision made meanwhile waits.
    await this.#holds.add(this.#transport.stop({ ...this.#target(), contextId, signal }), signal);
    const view = this.#view;
    if (signal.aborted || !idle() || view.snapshot.contextId !== contextId) return;
    // Show what the server records at once — the reply that asked is the last, stopped —
    // and the transcript then confirms it.
    const pending = view.snapshot.interrupt;
    let turns = [...view.snapshot.turns];
    if (pending) turns = withAsked(turns, { request: pending, status: "stopped", decision: null });
    const asked = turns.map((turn) => turn.role).lastIndexOf("assistant");
    if (asked !== -1) turns[asked] = { ...turns[asked]!, stopReason: "stopped" };
    view.show({ turns, interrupt: null, error: null });
    await this.#transcripts.refresh(contextId, signal, idle);
  }
}

/**
 * `turns` with the reply that asked `asked.request` showing `asked`: the reply
 * that carries that question, else (a transcript of an older server) the last reply.
 */
function withAsked(turns: readonly Turn[], asked: TurnAsked): Turn[] {
  const { interruptId } = asked.request;
  const asking = turns.filter((turn) => turn.asked?.request.interruptId === interruptId).at(-1);
  const index = asking ? turns.lastIndexOf(asking) : turns.map((turn) => turn.role).lastIndexOf("assistant");
  return turns.map((turn, at) => (at === index ? { ...turn, asked } : turn));
}
