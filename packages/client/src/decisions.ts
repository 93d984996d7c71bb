/**
 * Human in the loop: answering the pending interrupt, or ending the run that
 * waits for it.
 *
 * The interrupt leaves the view as soon as the answer goes out. A refusal
 * before the continued run began puts it back, unless the server says it is
 * gone (answered elsewhere, expired): then the transcript is loaded again,
 * since the view no longer matches the server.
 */
import { type ClientCore, failRun, type Job, openReply, type SendResult } from "./client-core.js";
import { aborted, toThinwireError } from "./errors.js";
import type { InterruptRequest } from "./generated/wire.js";
import { follow } from "./run-stream.js";
import { refresh } from "./transcript.js";

/** Sends the decision and follows the run it continues, in a fresh reply. */
export async function answer(
  core: ClientCore,
  contextId: string,
  interrupt: InterruptRequest,
  value: unknown,
  job: Job,
): Promise<SendResult> {
  const signal = job.controller.signal;
  const reply = openReply(core, core.state().snapshot.turns, { runId: null, interrupt: null });
  const { interruptId } = interrupt;
  try {
    const frames = () => core.transport.decide({ ...core.target(), contextId, interruptId, value, signal });
    return await follow(core, frames, false, job);
  } catch (caught) {
    if (signal.aborted) throw aborted(caught);
    const error = toThinwireError(caught);
    if (job.runKnown) {
      failRun(core, error, null, reply.id);
      throw error;
    }
    // Refused before the continued run began: the question is still open, unless the server says it is gone.
    const gone = error.code === "interrupt_answered" || error.code === "interrupt_not_found";
    failRun(core, error, null, reply.id, gone ? null : interrupt);
    if (gone) await refresh(core, contextId, job, signal);
    throw error;
  }
}

/**
 * A stop while a decision is pending: the server ends the waiting run with an
 * empty `stopped` reply. The request sits in `sideRequests` while it runs, so
 * `reset()` can cancel it.
 */
export async function endWaitingRun(
  core: ClientCore,
  contextId: string,
  sideRequests: Set<AbortController>,
): Promise<void> {
  const controller = new AbortController();
  sideRequests.add(controller);
  try {
    await core.transport.stop({ ...core.target(), contextId, signal: controller.signal });
    if (controller.signal.aborted || core.running()) return;
    const state = core.state();
    if (state.snapshot.contextId !== contextId) return;
    // Show what the server records at once; the transcript then confirms it.
    const snapshot = state.snapshot;
    core.commit({
      ...state,
      snapshot: {
        ...snapshot,
        turns: [...snapshot.turns, core.turn("assistant", "", false, [], "stopped")],
        interrupt: null,
        error: null,
      },
    });
    await refresh(core, contextId, null, controller.signal);
  } finally {
    sideRequests.delete(controller);
  }
}
