/**
 * Builders for tests: the frames of one run with consecutive seqs, a stream
 * the test pushes frames into by hand, and a transcript turn. A run's frames
 * are `RunFrame`s — every `Frame` but the WebSocket-only `rejected` — so each
 * has its `contextId`, `runId` and `seq`.
 *
 * ```ts
 * const r = runFrames("ctx-1", "run-1");
 * const frames = [r.start(), r.token("Hi!"), r.done("Hi!")];
 * ```
 */
import type { Frame, InterruptRequest, StopReason, TranscriptTurn } from "../generated/wire.js";
import type { RunFrame } from "../transport.js";

/** The ids a run_start announces. */
export interface StartIds {
  turnId?: string | null;
  userTurnId?: string | null;
  requestId?: string | null;
  /**
   * The turn the run's first new turn follows. Null (the default): the first
   * message — a client that shows turns takes it as a clear, and loads the
   * transcript once the run is over.
   */
  afterTurnId?: string | null;
  /**
   * The run first made another branch the one shown (the one the command
   * named): a client loads the transcript once the run is over. False by default.
   */
  branchSwitched?: boolean;
}

/** Builds the frames of one run of `contextId`, seqs counting up from `firstSeq`. */
export function runFrames(contextId: string, runId: string, firstSeq = 1) {
  let seq = firstSeq;
  const base = () => ({ contextId, runId, seq: seq++ });
  return {
    /**
     * The run_start: `turnId` is the id its reply will have in the transcript,
     * `userTurnId` the user turn it answers, `afterTurnId` the turn before it,
     * `branchSwitched` whether it first made another branch the one shown;
     * `requestId` is what a WebSocket server echoes of the command that started it.
     */
    start: ({ turnId = null, userTurnId = null, requestId = null, afterTurnId = null, branchSwitched = false }: StartIds = {}): RunFrame => ({
      ...base(),
      type: "run_start",
      agent: "demo",
      requestId,
      turnId,
      userTurnId,
      afterTurnId,
      branchSwitched,
    }),
    /** The agent named the conversation. */
    title: (title: string): RunFrame => ({ ...base(), type: "title", title }),
    thinking: (delta: string): RunFrame => ({ ...base(), type: "thinking", delta }),
    call: (callId: string, name: string): RunFrame => ({ ...base(), type: "tool_call", callId, name }),
    result: (callId: string, name: string, ok = true): RunFrame => ({ ...base(), type: "tool_result", callId, name, ok }),
    token: (delta: string): RunFrame => ({ ...base(), type: "token", delta }),
    interrupt: (interrupt: InterruptRequest): RunFrame => ({ ...base(), type: "interrupt", interrupt }),
    done: (text: string, toolCalls: string[] = [], stopReason: StopReason = "end"): RunFrame => ({
      ...base(),
      type: "done",
      text,
      toolCalls,
      stopReason,
    }),
    error: (code: string, message: string, retryable = false): RunFrame => ({
      ...base(),
      type: "error",
      code,
      message,
      retryable,
    }),
  };
}

/** A frame stream the test pushes into by hand: frames, then an end or a failure. */
export function channel() {
  const queue: Array<{ frame: Frame } | { error: unknown } | null> = [];
  let wake: (() => void) | null = null;
  const put = (item: (typeof queue)[number]) => {
    queue.push(item);
    const waiting = wake;
    wake = null;
    waiting?.();
  };
  return {
    push: (frame: Frame) => put({ frame }),
    /** The stream ends cleanly. */
    end: () => put(null),
    /** The stream throws `error`. */
    fail: (error: unknown) => put({ error }),
    async *frames(): AsyncGenerator<Frame> {
      for (;;) {
        while (queue.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        const item = queue.shift()!;
        if (item === null) return;
        if ("error" in item) throw item.error;
        yield item.frame;
      }
    },
  };
}

/**
 * A transcript turn with the defaults of the wire (no id, thinking, activity or
 * meta; no siblings), `fields` overriding them.
 *
 * ```ts
 * const turns = [transcriptTurn("user", "hi", { id: "turn-1" }), transcriptTurn("assistant", "Hello!", { id: "turn-2" })];
 * ```
 */
export function transcriptTurn(role: TranscriptTurn["role"], text: string, fields: Partial<TranscriptTurn> = {}): TranscriptTurn {
  return {
    id: "",
    role,
    text,
    toolCalls: [],
    stopReason: role === "assistant" ? "end" : null,
    thinking: "",
    activity: [],
    meta: { startedAt: null, finishedAt: null, model: null, usage: null },
    asked: null,
    siblings: 1,
    siblingIndex: 0,
    ...fields,
  };
}
