/**
 * The run reader: turns a transport's frames into view updates, and follows a
 * run to its `done` across broken streams.
 *
 * Frames go through the reducer, which drops duplicates (by `seq`) and frames
 * of other runs. A broken stream is not a failed run: the server keeps running
 * it, so the reader attaches again with the last `seq` it applied and backs
 * off between tries. When the attach has nothing to send, or frames of a later
 * run show up, the run ended while the client was away and the transcript has
 * its reply. A stream the server has nothing more for — a stop answered that
 * no run is going on — is ended and counts as broken: the same attach tells
 * how the run ended.
 *
 * Before the first frame there is no run to attach to: a send that failed then
 * may or may not have reached the server. A send is repeatable — it carries a
 * `messageId`, and the server answers a repeat with the run the first try
 * started, from its start — so when the failure leaves that open
 * (`mayBeUnanswered`), the reader sends it again, with the same backoff and
 * the same limit on tries.
 */
import { aborted, ThinwireError, toThinwireError } from "./errors.js";
import type { Frame, StopResult } from "./generated/wire.js";
import { requestSignal } from "./http.js";
import type { Job } from "./job.js";
import { backoffDelay, isReconnectable, mayBeUnanswered, type ReconnectOptions, sleep } from "./reconnect.js";
import { reduceFrame } from "./reduce.js";
import { resultOf, type SendResult } from "./send-result.js";
import type { ActiveRun, TranscriptLoader } from "./transcript-loader.js";
import type { Transport, TransportTarget } from "./transport.js";
import type { View } from "./view.js";

export interface RunReaderOptions {
  transport: Transport;
  /** Read at each request, so changed headers are picked up. */
  target: () => TransportTarget;
  view: View;
  /** Settles a run that ended while the reader was away. */
  transcripts: TranscriptLoader;
  reconnect: Required<ReconnectOptions>;
}

export interface FollowOptions {
  /** The stream follows a run already under way: when it has nothing left to send, the transcript settles the run. */
  attaching?: boolean;
  /** `open` may be called again while no frame of the run has arrived: it repeats an idempotent send. */
  repeatable?: boolean;
}

interface ReadOutcome {
  done: SendResult | null;
  /** Frames the transport yielded, duplicates included. */
  frames: number;
  /** Some frame changed the view. */
  progress: boolean;
  /** A later run of the same context showed up: ours is over. */
  superseded: boolean;
}

export class RunReader {
  readonly #transport: Transport;
  readonly #target: () => TransportTarget;
  readonly #view: View;
  readonly #transcripts: TranscriptLoader;
  readonly #limits: Required<ReconnectOptions>;

  constructor(options: RunReaderOptions) {
    this.#transport = options.transport;
    this.#target = options.target;
    this.#view = options.view;
    this.#transcripts = options.transcripts;
    this.#limits = options.reconnect;
  }

  /**
   * Reads the run whose frames `open` yields (a send's or a decision's) to its
   * `done`, attaching again with backoff after a stream that broke or ended
   * early — or, for a `repeatable` request that failed before the run's first
   * frame, calling `open` again. Throws the error to show when it gives up.
   * Each stream is opened with a signal of its own: the job's, which a stop
   * answered with no run going on also fires.
   */
  async follow(
    open: (signal: AbortSignal) => AsyncIterable<Frame>,
    job: Job,
    { attaching = false, repeatable = false }: FollowOptions = {},
  ): Promise<SendResult> {
    const signal = job.signal;
    const view = this.#view;
    let attempt = 0;
    for (;;) {
      let failure: ThinwireError;
      const outcome: ReadOutcome = { done: null, frames: 0, progress: false, superseded: false };
      const stream = requestSignal(signal);
      job.reading(stream.abort);
      try {
        await this.#read(open(stream.signal), stream.signal, job, outcome);
        if (outcome.done) return outcome.done;
        const { runId } = view.state;
        const { contextId } = view.snapshot;
        if (attaching && runId !== null && contextId !== null && (outcome.frames === 0 || outcome.superseded)) {
          // Nothing left to follow: the run ended while we were away.
          const settled = await this.#transcripts.settle(contextId, runId, signal);
          if (settled) return settled;
        }
        failure = new ThinwireError("stream_interrupted", "The stream ended before the reply was complete.", {
          retryable: true,
        });
      } catch (caught) {
        if (signal.aborted) throw aborted(caught);
        failure = stream.signal.aborted ? nothingMore() : toThinwireError(caught);
      } finally {
        job.reading(null);
        stream.release();
      }
      if (signal.aborted) throw aborted();
      // Progress before a break (frames, then a dropped connection) counts too.
      if (outcome.progress) attempt = 0;
      if (attempt >= this.#limits.attempts) throw failure;
      if (job.runKnown) {
        const contextId = view.snapshot.contextId;
        if (!isReconnectable(failure) || contextId === null) throw failure;
        const after = view.state.lastSeq ?? 0;
        open = (signal) => this.#transport.attach({ ...this.#target(), contextId, after, signal });
        attaching = true;
      } else if (!repeatable || !mayBeUnanswered(failure)) {
        // Without a run_start there is no run to attach to (it may never have started).
        throw failure;
      }
      // Else `open` stays: the same request again (a send keeps its messageId).
      view.setStatus("reconnecting");
      await sleep(backoffDelay(attempt, this.#limits), signal);
      attempt += 1;
    }
  }

  /**
   * Follows a run `start()` found in progress into a fresh reply after the
   * transcript's turns, and resolves with its result. A failure is shown in
   * the view, then thrown (`aborted` when the job was cancelled).
   */
  async resume(job: Job, contextId: string, active: ActiveRun): Promise<SendResult> {
    const view = this.#view;
    const { runId, interrupt, hasEarlier } = active;
    const error = active.error ?? null;
    view.openReply(active.turns, { runId, lastSeq: null, interrupt, hasEarlier, error });
    const signal = job.signal;
    try {
      const frames = (stream: AbortSignal) =>
        this.#transport.attach({ ...this.#target(), contextId, after: 0, signal: stream });
      return await this.follow(frames, job, { attaching: true });
    } catch (caught) {
      if (signal.aborted) throw aborted(caught);
      const error = toThinwireError(caught);
      view.failRun(error);
      throw error;
    }
  }

  /**
   * Reads one stream into the view, until its `done` or its end, or until
   * `signal` (the stream's) fires; `outcome` says how far it got, even when it throws.
   */
  async #read(frames: AsyncIterable<Frame>, signal: AbortSignal, job: Job, outcome: ReadOutcome): Promise<void> {
    const view = this.#view;
    // A transport that ignores the signal must not keep send() pending after reset().
    const abortion = new Promise<never>((_, reject) => {
      if (signal.aborted) reject(aborted());
      signal.addEventListener("abort", () => reject(aborted()), { once: true });
    });
    abortion.catch(() => undefined);
    let iterator: AsyncIterator<Frame> | undefined;
    try {
      iterator = frames[Symbol.asyncIterator]();
      for (;;) {
        const step = await Promise.race([iterator.next(), abortion]);
        if (step.done) return;
        const frame = step.value;
        outcome.frames += 1;
        if (job.runKnown && view.append(frame)) {
          outcome.progress = true; // a delta of the reply: shown, the snapshot built when read
          continue;
        }
        if (this.#supersedes(frame)) outcome.superseded = true;
        const state = view.state;
        let next = reduceFrame(state, frame);
        if (next === state) continue;
        outcome.progress = true;
        if (next.snapshot.status === "reconnecting") {
          next = { ...next, snapshot: { ...next.snapshot, status: "streaming" } };
        }
        view.commit(next, { batch: true });
        if (!job.runKnown) job.runStarted(this.#stopper(view.snapshot.contextId));
        if (frame.type === "done") {
          // The server ends the stream right after `done`: read it to the end instead of
          // cancelling, so the request completes cleanly rather than as an aborted one.
          void drain(iterator);
          outcome.done = resultOf(frame);
          return;
        }
      }
    } catch (caught) {
      if (signal.aborted) {
        void Promise.resolve(iterator?.return?.()).catch(() => undefined);
        throw aborted(caught);
      }
      throw caught;
    }
  }

  /** A frame of a later run of our context: the server has moved on from ours. */
  #supersedes(frame: Frame): boolean {
    const { runId, lastSeq, snapshot } = this.#view.state;
    return (
      frame.type !== "rejected" &&
      runId !== null &&
      frame.contextId === snapshot.contextId &&
      frame.runId !== runId &&
      typeof frame.seq === "number" &&
      frame.seq > (lastSeq ?? 0)
    );
  }

  /** How a job stops its run, once the reader saw it start. */
  #stopper(contextId: string | null): () => Promise<StopResult | void> {
    if (contextId === null) return () => Promise.resolve();
    return () => this.#transport.stop({ ...this.#target(), contextId });
  }
}

async function drain(iterator: AsyncIterator<Frame>): Promise<void> {
  try {
    while (!(await iterator.next()).done);
  } catch {
    // Whatever follows `done` cannot change the result.
  }
}

/** A stream ended because the server has nothing more for it: attached to again, as a broken one is. */
function nothingMore(): ThinwireError {
  return new ThinwireError("stream_interrupted", "The server has no run going on for this stream.", { retryable: true });
}
