/** The frame reducer: a whole run, dedupe, other runs, errors, interrupts. */
import { describe, expect, it } from "vitest";
import type { Frame } from "./generated/wire.js";
import { initialReducerState, reduceFrame, reduceFrames } from "./reduce.js";
import { emptySnapshot, NO_META } from "./snapshot.js";

const ids = { contextId: "ctx-1", runId: "run-1" };
/** The fields of a turn no frame has touched. */
const blank = { toolCalls: [], streaming: false, stopReason: null, thinking: "", activity: [], meta: NO_META, asked: null, siblings: 1, siblingIndex: 0 };

const RUN: Frame[] = [
  { ...ids, seq: 1, type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false },
  { ...ids, seq: 2, type: "thinking", delta: "Let me " },
  { ...ids, seq: 3, type: "thinking", delta: "check." },
  { ...ids, seq: 4, type: "tool_call", callId: "c1", name: "weather" },
  { ...ids, seq: 5, type: "tool_call", callId: "c2", name: "calendar" },
  { ...ids, seq: 6, type: "tool_result", callId: "c1", name: "weather", ok: true },
  { ...ids, seq: 7, type: "tool_result", callId: "c2", name: "calendar", ok: false },
  { ...ids, seq: 8, type: "token", delta: "Sunny" },
  { ...ids, seq: 9, type: "token", delta: " today." },
  { ...ids, seq: 10, type: "done", text: "Sunny today.", toolCalls: ["weather", "calendar"], stopReason: "end" },
];

describe("reduceFrame", () => {
  it("reduces a whole run to the view state", () => {
    const { snapshot, runId, lastSeq } = reduceFrames(initialReducerState(), RUN);
    expect(runId).toBe("run-1");
    expect(lastSeq).toBe(10);
    expect(snapshot).toEqual({
      contextId: "ctx-1",
      status: "idle",
      error: null,
      interrupt: null,
      thinking: "Let me check.",
      activity: [
        { callId: "c1", name: "weather", state: "ok" },
        { callId: "c2", name: "calendar", state: "error" },
      ],
      title: null,
      hasEarlier: false,
      turns: [
        {
          ...blank,
          id: "reply:run-1",
          role: "assistant",
          text: "Sunny today.",
          toolCalls: ["weather", "calendar"],
          stopReason: "end",
          // The reply shows what its run showed.
          thinking: "Let me check.",
          activity: [
            { callId: "c1", name: "weather", state: "ok" },
            { callId: "c2", name: "calendar", state: "error" },
          ],
        },
      ],
    });
  });

  it("shows the reply done keeps in place of the deltas", () => {
    // An agent may keep less than it streamed: a draft its framework sent back.
    const drafted: Frame[] = [
      RUN[0]!,
      { ...ids, seq: 2, type: "token", delta: "DRAFT " },
      { ...ids, seq: 3, type: "token", delta: "Final." },
      { ...ids, seq: 4, type: "done", text: "Final.", toolCalls: [], stopReason: "end" },
    ];
    const { snapshot } = reduceFrames(initialReducerState(), drafted);
    expect(snapshot.turns.map((turn) => turn.text)).toEqual(["Final."]);
  });

  it("gives the open turns the ids run_start announces", () => {
    const open = {
      ...emptySnapshot(null),
      turns: [
        { ...blank, id: "turn-u1", role: "user" as const, text: "hi" },
        { ...blank, id: "turn-a2", role: "assistant" as const, text: "Hello" },
        { ...blank, id: "user-3", role: "user" as const, text: "again" },
        { ...blank, id: "assistant-4", role: "assistant" as const, text: "", streaming: true },
      ],
    };
    const start: Frame = { ...RUN[0]!, turnId: "turn-a4", userTurnId: "turn-u3" } as Frame;
    const state = reduceFrame(initialReducerState(open), start);
    expect(state.snapshot.turns.map((turn) => turn.id)).toEqual(["turn-u1", "turn-a2", "turn-u3", "turn-a4"]);
    // A decision's run answers no user turn: only the reply is renamed.
    const decided = reduceFrame(initialReducerState(open), { ...start, userTurnId: null } as Frame);
    expect(decided.snapshot.turns.map((turn) => turn.id)).toEqual(["turn-u1", "turn-a2", "user-3", "turn-a4"]);
    // An older server announces no ids: the provisional ones stay.
    expect(reduceFrame(initialReducerState(open), RUN[0]!).snapshot.turns).toEqual(open.turns);
  });

  it("lets a reply the transcript listed for the run in progress give way to the live one", () => {
    const open = {
      ...emptySnapshot("ctx-1"),
      turns: [
        { ...blank, id: "turn-u1", role: "user" as const, text: "hi" },
        { ...blank, id: "turn-a2", role: "assistant" as const, text: "Hel" },
        { ...blank, id: "assistant-3", role: "assistant" as const, text: "", streaming: true },
      ],
    };
    const state = reduceFrame(initialReducerState(open), { ...RUN[0]!, turnId: "turn-a2", userTurnId: null } as Frame);
    expect(state.snapshot.turns.map((turn) => [turn.id, turn.streaming])).toEqual([
      ["turn-u1", false],
      ["turn-a2", true],
    ]);
  });

  it("takes the title a title frame names", () => {
    const state = reduceFrames(initialReducerState(), [RUN[0]!, { ...ids, seq: 2, type: "title", title: "Weather" }]);
    expect(state.snapshot.title).toBe("Weather");
    const again = reduceFrame(state, { ...ids, seq: 3, type: "title", title: "Weather" });
    expect(again.snapshot).toBe(state.snapshot);
    expect(again.lastSeq).toBe(3);
  });

  it("streams token deltas into the open reply", () => {
    const state = reduceFrames(initialReducerState(), RUN.slice(0, 9));
    const reply = state.snapshot.turns.at(-1);
    expect(reply).toMatchObject({ role: "assistant", text: "Sunny today.", streaming: true });
    expect(state.snapshot.status).toBe("streaming");
  });

  it("returns the same state for duplicates, unknown types and other runs", () => {
    const state = reduceFrames(initialReducerState(), RUN.slice(0, 8));
    expect(reduceFrame(state, RUN[7]!)).toBe(state);
    expect(reduceFrame(state, { ...ids, seq: 3, type: "token", delta: "old" })).toBe(state);
    expect(reduceFrame(state, { ...ids, seq: 20, type: "interrupt_v9", prompt: "?" } as unknown as Frame)).toBe(state);
    expect(reduceFrame(state, { contextId: "ctx-1", runId: "run-0", seq: 30, type: "token", delta: "x" })).toBe(state);
    const next = reduceFrame(state, RUN[8]!);
    expect(next).not.toBe(state);
    expect(next.snapshot.turns).not.toBe(state.snapshot.turns);
    expect(state.snapshot.turns.at(-1)?.text).toBe("Sunny"); // the old snapshot is untouched
  });

  it("records an error frame and ends in the error status", () => {
    const state = reduceFrames(initialReducerState(), [
      RUN[0]!,
      { ...ids, seq: 2, type: "error", code: "agent_failed", message: "Boom", retryable: true },
      { ...ids, seq: 3, type: "done", text: "", toolCalls: [], stopReason: "error" },
    ]);
    expect(state.snapshot.status).toBe("error");
    expect(state.snapshot.error).toEqual({ code: "agent_failed", message: "Boom", retryable: true });
  });

  it("shows run_failed for a run that ended in error without an error frame", () => {
    const state = reduceFrames(initialReducerState(), [
      RUN[0]!,
      { ...ids, seq: 2, type: "done", text: "", toolCalls: [], stopReason: "error" },
    ]);
    expect(state.snapshot.status).toBe("error");
    expect(state.snapshot.error).toEqual({ code: "run_failed", message: "The run failed.", retryable: false });
  });

  it("appends to the streaming reply instead of starting another", () => {
    const open = {
      ...emptySnapshot("ctx-1"),
      turns: [
        { ...blank, id: "u", role: "user" as const, text: "hi" },
        { ...blank, id: "a", role: "assistant" as const, text: "", streaming: true },
      ],
    };
    const state = reduceFrames(initialReducerState(open), RUN);
    expect(state.snapshot.turns.map((turn) => [turn.id, turn.text])).toEqual([
      ["u", "hi"],
      ["a", "Sunny today."],
    ]);
  });

  it("accepts a lower seq once the context changes", () => {
    const first = reduceFrames(initialReducerState(), RUN);
    const other = { contextId: "ctx-2", runId: "run-9" };
    const next = reduceFrame({ ...first, runId: null }, { ...other, seq: 1, type: "run_start", agent: "demo", requestId: null, turnId: null, userTurnId: null, afterTurnId: null, branchSwitched: false });
    expect(next.snapshot.contextId).toBe("ctx-2");
    expect(next.lastSeq).toBe(1);
  });

  it("keeps the question of an interrupt frame and ends the reply as interrupted, idle", () => {
    const interrupt = {
      interruptId: "int-1",
      prompt: "Refund $40?",
      options: ["approve", "reject"],
      payload: { order: "1234" },
      decisionSchema: null,
    };
    const state = reduceFrames(initialReducerState(), [
      RUN[0]!,
      { ...ids, seq: 2, type: "token", delta: "Let me ask." },
      { ...ids, seq: 3, type: "interrupt", interrupt: { ...interrupt, internal: "dropped" } as typeof interrupt },
      { ...ids, seq: 4, type: "done", text: "Let me ask.", toolCalls: [], stopReason: "interrupted" },
    ]);
    expect(state.snapshot.interrupt).toEqual(interrupt);
    expect(state.snapshot.status).toBe("idle");
    expect(state.snapshot.error).toBeNull();
    expect(state.snapshot.turns).toEqual([
      expect.objectContaining({ text: "Let me ask.", streaming: false, stopReason: "interrupted" }),
    ]);
  });

  it("ignores an interrupt frame without an id or a prompt", () => {
    const state = reduceFrames(initialReducerState(), RUN.slice(0, 2));
    const broken = { ...ids, seq: 3, type: "interrupt", interrupt: { prompt: "?" } } as unknown as Frame;
    expect(reduceFrame(state, broken).snapshot).toBe(state.snapshot);
  });
});
