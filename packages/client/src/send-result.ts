/** What `send()` and `decide()` resolve with: the final reply of the run they streamed. */
import type { DoneFrame, StopReason } from "./generated/wire.js";

export interface SendResult {
  text: string;
  toolCalls: string[];
  contextId: string;
  runId: string;
  stopReason: StopReason;
}

export function resultOf(frame: DoneFrame): SendResult {
  return {
    text: frame.text,
    toolCalls: [...frame.toolCalls],
    contextId: frame.contextId,
    runId: frame.runId,
    stopReason: frame.stopReason,
  };
}
