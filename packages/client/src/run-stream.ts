/**
 * Reading a run into the view: a send's stream, or a run found in progress,
 * followed to its `done` across broken streams.
 *
 * A broken stream is not a failed run: the server keeps running it, so the
 * client attaches again with the last `seq` it applied (the reducer drops
 * anything older) and backs off between tries. When the attach has nothing to
 * send, or frames of a later run show up, the run ended while the client was
 * away and the transcript has its reply.
 */
import { type ClientCore, failRun, type Job, openReply, type SendResult, setStatus } from "./client-core.js";
import { aborted, ThinwireError, toThinwireError, withInterruptId } from "./errors.js";
import type { DoneFrame, Frame, InterruptRequest, RunRequest } from "./generated/wire.js";
import { backoffDelay, isReconnectable } from "./reconnect.js";
import { reduceFrame } from "./reduce.js";
import type { Turn } from "./snapshot.js";
import { refresh, settle } from "./transcript.js";

interface ReadOutcome {
  done: DoneFrame | null;
  /** Frames the transport yielded, duplicates included. */
  frames: number;
  /** Some frame changed the view. */
  progress: boolean;
  /** A later run of the same context showed up: ours is over. */
  superseded: boolean;
}

/** Sends `text` as a new user turn and streams the run it starts into a fresh reply. */
export async function streamMessage(core: ClientCore, text: string, job: Job): Promise<SendResult> {
  const signal = job.controller.signal;
  const before = core.state().snapshot;
  const user = core.turn("user", text, false);
  const reply = openReply(core, [...before.turns, user], { runId: null });

  const body: RunRequest = { message: { text } };
  if (before.contextId !== null) body.contextId = before.contextId;
  try {
    const frames = () => core.transport.run({ ...core.target(), body, signal });
    return await follow(core, frames, false, job);
  } catch (caught) {
    if (signal.aborted) throw aborted(caught);
    let error = toThinwireError(caught);
    // A request that produced no frame leaves no trace but the error.
    failRun(core, error, job.runKnown ? null : user.id, reply.id);
    if (error.code === "decision_pending" && before.contextId !== null) {
      // The conversation waits for a decision this client did not know of (another tab, say): show it.
      const interrupt = await refresh(core, before.contextId, job, signal);
      if (signal.aborted) throw aborted(caught);
      if (error.interruptId === undefined && interrupt) error = withInterruptId(error, interrupt.interruptId);
    }
    throw error;
  }
}

/**
 * Follows a run found in progress (`job` already knows it) into a fresh reply
 * after the transcript's `turns`. Never rejects: a failure lands in the snapshot.
 */
export function followActiveRun(
  core: ClientCore,
  job: Job,
  contextId: string,
  runId: string,
  turns: Turn[],
  interrupt: InterruptRequest | null,
): Promise<void> {
  const reply = openReply(core, turns, { runId, lastSeq: null, interrupt });
  const signal = job.controller.signal;
  const frames = () => core.transport.attach({ ...core.target(), contextId, after: 0, signal });
  return follow(core, frames, true, job).then(
    () => undefined,
    (caught: unknown) => {
      if (!signal.aborted) failRun(core, toThinwireError(caught), null, reply.id);
    },
  );
}

/**
 * Reads a run to its `done`, attaching again (with backoff) after a stream
 * that broke or ended early. Throws the error to show when it gives up.
 */
export async function follow(
  core: ClientCore,
  open: () => AsyncIterable<Frame>,
  attaching: boolean,
  job: Job,
): Promise<SendResult> {
  const signal = job.controller.signal;
  const limits = core.reconnect;
  let attempt = 0;
  for (;;) {
    let failure: ThinwireError;
    try {
      const outcome = await read(core, open(), job);
      if (outcome.done) return resultOf(outcome.done);
      if (outcome.progress) attempt = 0;
      const { runId } = core.state();
      const { contextId } = core.state().snapshot;
      if (attaching && runId !== null && contextId !== null && (outcome.frames === 0 || outcome.superseded)) {
        // Nothing left to follow: the run ended while we were away.
        const settled = await settle(core, contextId, runId, signal);
        if (settled) return settled;
      }
      failure = new ThinwireError("stream_interrupted", "The stream ended before the reply was complete.", {
        retryable: true,
      });
    } catch (caught) {
      if (signal.aborted) throw aborted(caught);
      failure = toThinwireError(caught);
      if (!isReconnectable(failure)) throw failure;
    }
    if (signal.aborted) throw aborted();
    const contextId = core.state().snapshot.contextId;
    // Without a run_start there is no run to attach to (it may never have started).
    if (!job.runKnown || contextId === null || attempt >= limits.attempts) throw failure;
    setStatus(core, "reconnecting");
    await sleep(backoffDelay(attempt, limits), signal);
    attempt += 1;
    const after = core.state().lastSeq ?? 0;
    open = () => core.transport.attach({ ...core.target(), contextId, after, signal });
    attaching = true;
  }
}

/** Reads one stream into the snapshot, until its `done` or its end. */
async function read(core: ClientCore, frames: AsyncIterable<Frame>, job: Job): Promise<ReadOutcome> {
  const signal = job.controller.signal;
  const outcome: ReadOutcome = { done: null, frames: 0, progress: false, superseded: false };
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
      if (step.done) return outcome;
      const frame = step.value;
      outcome.frames += 1;
      if (supersedes(core, frame)) outcome.superseded = true;
      const state = core.state();
      let next = reduceFrame(state, frame);
      if (next === state) continue;
      outcome.progress = true;
      if (next.snapshot.status === "reconnecting") {
        next = { ...next, snapshot: { ...next.snapshot, status: "streaming" } };
      }
      core.commit(next, true, true);
      if (!job.runKnown) {
        job.runKnown = true;
        sendStops(core, job);
      }
      if (frame.type === "done") {
        // The server ends the stream right after `done`: read it to the end instead of
        // cancelling, so the request completes cleanly rather than as an aborted one.
        void drain(iterator);
        outcome.done = frame;
        return outcome;
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
function supersedes(core: ClientCore, frame: Frame): boolean {
  const { runId, lastSeq, snapshot } = core.state();
  return (
    frame.type !== "rejected" &&
    runId !== null &&
    frame.contextId === snapshot.contextId &&
    frame.runId !== runId &&
    typeof frame.seq === "number" &&
    frame.seq > (lastSeq ?? 0)
  );
}

/** Stops asked for before the run was known go out now. */
function sendStops(core: ClientCore, job: Job): void {
  const contextId = core.state().snapshot.contextId;
  const stops = job.stops.splice(0);
  if (stops.length === 0 || contextId === null) return;
  const request = core.transport.stop({ ...core.target(), contextId });
  for (const stop of stops) request.then(stop.resolve, stop.reject);
}

function resultOf(frame: DoneFrame): SendResult {
  return {
    text: frame.text,
    toolCalls: [...frame.toolCalls],
    contextId: frame.contextId,
    runId: frame.runId,
    stopReason: frame.stopReason,
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(aborted());
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

async function drain(iterator: AsyncIterator<Frame>): Promise<void> {
  try {
    while (!(await iterator.next()).done);
  } catch {
    // Whatever follows `done` cannot change the result.
  }
}
