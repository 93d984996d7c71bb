/**
 * The server's transcript in the view: loading a conversation on `start()`,
 * showing it again after the view fell out of step (a refused decision, a
 * waiting run stopped), and reading the reply of a run that ended unseen.
 *
 * Turns shown again keep their ids where the role matches, so React keys stay stable.
 */
import { type ClientCore, errorInfo, type Job, type SendResult } from "./client-core.js";
import { aborted, ThinwireError, toThinwireError } from "./errors.js";
import type { InterruptRequest, Transcript, TranscriptTurn } from "./generated/wire.js";
import { fetchTranscript, publicTurns } from "./http.js";
import { publicInterrupt } from "./interrupt.js";
import { initialReducerState } from "./reduce.js";
import { emptySnapshot, type Turn } from "./snapshot.js";
import { agentUrl } from "./transport.js";

/** Picks up a run found in progress, after the transcript's `turns`. */
export type Resume = (runId: string, turns: Turn[], interrupt: InterruptRequest | null) => void;

/**
 * Shows the transcript of `contextId` and hands a run in progress to `resume`.
 * Never rejects: failures land in the snapshot, and an id the server does not
 * know is forgotten.
 */
export async function hydrate(core: ClientCore, contextId: string, signal: AbortSignal, resume: Resume): Promise<void> {
  try {
    const transcript = await loadTranscript(core, contextId, signal);
    if (signal.aborted) return;
    const turns = publicTurns(transcript.turns).map((turn) => fromTranscript(core, turn));
    const interrupt = publicInterrupt(transcript.pendingInterrupt);
    const active = transcript.activeRunId;
    if (typeof active === "string" && active !== "") {
      resume(active, turns, interrupt);
    } else {
      const state = core.state();
      core.commit({ ...state, snapshot: { ...state.snapshot, turns, interrupt, status: "idle" } });
    }
  } catch (caught) {
    if (signal.aborted) return;
    const error = toThinwireError(caught);
    if (error.code === "context_not_found") {
      core.commit(initialReducerState(emptySnapshot(null)));
    } else {
      const state = core.state();
      core.commit({ ...state, snapshot: { ...state.snapshot, status: "error", error: errorInfo(error) } });
    }
  }
}

/**
 * Shows the server's transcript and pending interrupt again, keeping turn ids;
 * best effort. Only while `owner` (a job, or null: nothing) is what runs.
 * Resolves with the pending interrupt, or undefined when nothing was shown.
 */
export async function refresh(
  core: ClientCore,
  contextId: string,
  owner: Job | null,
  signal: AbortSignal,
): Promise<InterruptRequest | null | undefined> {
  let transcript: Transcript;
  try {
    transcript = await loadTranscript(core, contextId, signal);
  } catch {
    return undefined;
  }
  if (signal.aborted || core.running() !== owner || core.state().snapshot.contextId !== contextId) return undefined;
  const interrupt = publicInterrupt(transcript.pendingInterrupt);
  const state = core.state();
  core.commit({
    ...state,
    snapshot: { ...state.snapshot, turns: replaceTurns(core, publicTurns(transcript.turns)), interrupt },
  });
  return interrupt;
}

/** The run ended unseen: its reply is the transcript's last assistant turn. Null if it still runs. */
export async function settle(
  core: ClientCore,
  contextId: string,
  runId: string,
  signal: AbortSignal,
): Promise<SendResult | null> {
  const transcript = await loadTranscript(core, contextId, signal);
  if (signal.aborted) throw aborted();
  if (transcript.activeRunId === runId) return null;
  const turns = publicTurns(transcript.turns);
  const reply = [...turns].reverse().find((turn) => turn.role === "assistant");
  if (!reply) {
    throw new ThinwireError("stream_interrupted", "The run ended without a reply.", { retryable: false });
  }
  const stopReason = reply.stopReason ?? "end";
  const failed = stopReason === "error";
  const state = core.state();
  const snapshot = state.snapshot;
  core.commit({
    ...state,
    snapshot: {
      ...snapshot,
      turns: replaceTurns(core, turns),
      interrupt: publicInterrupt(transcript.pendingInterrupt),
      status: failed ? "error" : "idle",
      error:
        failed && snapshot.error === null
          ? { code: "run_failed", message: "The run failed.", retryable: false }
          : snapshot.error,
    },
  });
  return { text: reply.text, toolCalls: [...reply.toolCalls], contextId, runId, stopReason };
}

function loadTranscript(core: ClientCore, contextId: string, signal: AbortSignal): Promise<Transcript> {
  const url = agentUrl(core.target(), `/contexts/${encodeURIComponent(contextId)}`);
  return fetchTranscript(core.fetch, url, core.headers(), signal);
}

function fromTranscript(core: ClientCore, turn: TranscriptTurn, id?: string): Turn {
  const fresh = core.turn(turn.role, turn.text, false, turn.toolCalls, turn.stopReason ?? null);
  return id === undefined ? fresh : { ...fresh, id };
}

/** The transcript's turns, keeping the ids of the turns shown at the same places. */
function replaceTurns(core: ClientCore, turns: readonly TranscriptTurn[]): Turn[] {
  const shown = core.state().snapshot.turns;
  return turns.map((turn, index) => {
    const current = shown[index];
    return fromTranscript(core, turn, current?.role === turn.role ? current.id : undefined);
  });
}
