/**
 * The pure frame → view-state reducer. `AgentClient` drives it; conformance
 * tests feed it recorded streams. A frame that changes nothing returns the very
 * same state object.
 */
import { FRAME_TYPES, type Frame, type RunStartFrame, type ToolCallFrame, type ToolResultFrame } from "./generated/wire.js";
import { publicInterrupt } from "./interrupt.js";
import type { RunFrame } from "./transport.js";
import { emptySnapshot, NO_META, runEnded, type Activity, type Snapshot, type Turn } from "./snapshot.js";

export interface ReducerState {
  readonly snapshot: Snapshot;
  /** The run being read; frames of any other run are ignored. Null until the first frame. */
  readonly runId: string | null;
  /** Highest `seq` applied for `snapshot.contextId`; frames at or below it are duplicates. */
  readonly lastSeq: number | null;
}

export function initialReducerState(snapshot: Snapshot = emptySnapshot()): ReducerState {
  return { snapshot, runId: null, lastSeq: null };
}

/** The frames of a run: every type of this protocol version but the WebSocket-only `rejected`. */
const RUN_FRAME_TYPES: ReadonlySet<string> = new Set(FRAME_TYPES.filter((type) => type !== "rejected"));

/** Whether the frame is new, of a known type and of the run being read. */
export function acceptsFrame(state: ReducerState, frame: Frame): frame is RunFrame {
  if (frame.type === "rejected" || !RUN_FRAME_TYPES.has(frame.type)) return false;
  if (state.runId !== null && frame.runId !== state.runId) return false;
  const sameContext = frame.contextId === state.snapshot.contextId;
  if (sameContext && state.lastSeq !== null && typeof frame.seq === "number" && frame.seq <= state.lastSeq) {
    return false;
  }
  return true;
}

export function reduceFrame(state: ReducerState, frame: Frame): ReducerState {
  if (!acceptsFrame(state, frame)) return state;
  return {
    snapshot: applyFrame(state.snapshot, frame),
    runId: state.runId ?? frame.runId,
    lastSeq: typeof frame.seq === "number" ? frame.seq : state.lastSeq,
  };
}

/** Applies every frame in order: `reduceFrames(initialReducerState(), frames).snapshot`. */
export function reduceFrames(state: ReducerState, frames: Iterable<Frame>): ReducerState {
  for (const frame of frames) state = reduceFrame(state, frame);
  return state;
}

function applyFrame(snapshot: Snapshot, frame: RunFrame): Snapshot {
  switch (frame.type) {
    case "run_start":
      return { ...snapshot, contextId: frame.contextId, status: "streaming", turns: withServerIds(snapshot.turns, frame) };
    case "title":
      if (typeof frame.title !== "string" || frame.title === snapshot.title) return snapshot;
      return { ...snapshot, title: frame.title };
    case "thinking":
      return {
        ...snapshot,
        thinking: snapshot.thinking + frame.delta,
        turns: updateReply(snapshot.turns, frame.runId, (turn) => ({ ...turn, thinking: turn.thinking + frame.delta })),
      };
    case "tool_call":
    case "tool_result": {
      const activity = withToolFrame(snapshot.activity, frame);
      if (activity === snapshot.activity) return snapshot;
      return {
        ...snapshot,
        activity,
        turns: updateReply(snapshot.turns, frame.runId, (turn) => ({ ...turn, activity: withToolFrame(turn.activity, frame) })),
      };
    }
    case "token":
      return {
        ...snapshot,
        turns: updateReply(snapshot.turns, frame.runId, (turn) => ({ ...turn, text: turn.text + frame.delta })),
      };
    case "interrupt": {
      // The reply keeps its text; the `done` that follows (stop reason `interrupted`) ends it.
      // It asked, as the transcript will say.
      const interrupt = publicInterrupt(frame.interrupt);
      if (!interrupt) return snapshot;
      const asked = { request: interrupt, status: "waiting", decision: null } as const;
      return { ...snapshot, interrupt, turns: updateReply(snapshot.turns, frame.runId, (turn) => ({ ...turn, asked })) };
    }
    case "done":
      return {
        ...snapshot,
        turns: updateReply(snapshot.turns, frame.runId, (turn) => ({
          ...turn,
          text: frame.text,
          toolCalls: [...frame.toolCalls],
          streaming: false,
          stopReason: frame.stopReason,
        })),
        ...runEnded(snapshot, frame.stopReason),
      };
    case "error":
      return {
        ...snapshot,
        error: { code: frame.code, message: frame.message, retryable: frame.retryable },
      };
    default:
      return snapshot;
  }
}

/** A tool call or result applied to a list of calls; the same list when it changes nothing. */
function withToolFrame(activity: readonly Activity[], frame: ToolCallFrame | ToolResultFrame): readonly Activity[] {
  if (frame.type === "tool_call") {
    if (activity.some((item) => item.callId === frame.callId)) return activity;
    return [...activity, { callId: frame.callId, name: frame.name, state: "running" }];
  }
  const state: Activity["state"] = frame.ok ? "ok" : "error";
  const known = activity.some((item) => item.callId === frame.callId);
  return known
    ? activity.map((item) => (item.callId === frame.callId ? { ...item, state } : item))
    : [...activity, { callId: frame.callId, name: frame.name, state }];
}

/**
 * The turns with the ids `run_start` announced: `turnId` for the streaming
 * reply, `userTurnId` for the user turn just before it. A turn already shown
 * under the reply's id (a transcript that listed the run in progress) gives
 * way to the live reply.
 */
function withServerIds(turns: readonly Turn[], frame: RunStartFrame): readonly Turn[] {
  const last = turns[turns.length - 1];
  if (!last || last.role !== "assistant" || !last.streaming) return turns;
  const replyId = serverId(frame.turnId);
  const userId = serverId(frame.userTurnId);
  const before = turns[turns.length - 2];
  const renameReply = replyId !== null && last.id !== replyId;
  const renameUser = userId !== null && before?.role === "user" && before.id !== userId;
  if (!renameReply && !renameUser) return turns;
  const earlier = turns.slice(0, renameUser ? -2 : -1).filter((turn) => turn.id !== replyId);
  return [
    ...earlier,
    ...(renameUser ? [{ ...before, id: userId }] : []),
    renameReply ? { ...last, id: replyId } : last,
  ];
}

function serverId(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

/** Updates the streaming reply, or starts one when the stream began without it. */
function updateReply(turns: readonly Turn[], runId: string, update: (turn: Turn) => Turn): Turn[] {
  const last = turns[turns.length - 1];
  if (last && last.role === "assistant" && last.streaming) {
    return [...turns.slice(0, -1), update(last)];
  }
  const fresh: Turn = {
    id: `reply:${runId}`,
    role: "assistant",
    text: "",
    toolCalls: [],
    streaming: true,
    stopReason: null,
    thinking: "",
    activity: [],
    meta: NO_META,
    asked: null,
    siblings: 1,
    siblingIndex: 0,
  };
  return [...turns, update(fresh)];
}
