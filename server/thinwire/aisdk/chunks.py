"""Frames to UI message chunks: a thinwire run as the AI SDK's `useChat` reads it.

    run_start     start {messageId: turnId, messageMetadata: {contextId}}, start-step
    thinking      reasoning-start (before the first delta of a stretch), reasoning-delta
    token         text-start (before the first delta of a stretch), text-delta
    tool_call     tool-input-start, tool-input-available {input: {}}, its id the
                  reply's turn id and the call's (as the messages of a reload have it)
    tool_result   tool-output-available {output: null}, or tool-output-error
    interrupt     tool-input-start, tool-input-available of the tool `interrupt`, its
                  input the public request (prompt, options, payload, decisionSchema)
    title         data-title, transient
    error         error {errorText: the frame's public message}
    done          finish-step, abort (when stopped), finish {finishReason,
                  messageMetadata: {stopReason}}, then [DONE]

A stretch of text or reasoning ends (`text-end`, `reasoning-end`) before anything else
is shown, so the parts read in the order the run showed them and a text part is `done`
before the tool that follows it: the SDK's `lastAssistantMessageIsCompleteWithToolCalls`
then sends an answered interrupt on its own.

The agent's tools are dynamic tools run by the server (`providerExecuted`): the page
neither runs nor answers them. Their arguments and outputs never reach a frame, so they
cannot reach a chunk: the input is `{}`, the output `null`, a failure's text a fixed
sentence. An interrupt is the one tool the page answers (`addToolOutput`).

A run waiting for a decision finishes with `tool-calls`: the SDK's `interrupted` would
mark the message as cut short and keep the answer from being sent automatically.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DONE", "INTERRUPT_TOOL", "TOOL_FAILED", "Chunks"]

#: The tool an interrupt appears as: parts of type `tool-interrupt`.
INTERRUPT_TOOL = "interrupt"
#: What a failed tool's part says: the error itself stays on the server.
TOOL_FAILED = "The tool failed."
#: The stream's last event.
DONE = "[DONE]"

Chunk = dict[str, Any]


class Chunks:
    """Translates the frames of one stream, in order, into UI message chunks.

    `continues_message`: the stream answers a decision, so its reply goes on in the
    message that asked (the SDK sent its id), and `start` names no message of its own.
    """

    def __init__(self, *, continues_message: bool = False) -> None:
        self.continues_message = continues_message
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        #: The reply's turn id (`run_start`): a tool call's id starts with it.
        self.turn_id: str | None = None
        #: The run asked a person something: its end awaits the page's answer.
        self.asked = False

    def encode(self, frame: dict[str, Any]) -> list[str]:
        """The chunks of one frame, as SSE `data` (JSON, or `[DONE]` after the last)."""
        chunks = [json.dumps(chunk, separators=(",", ":")) for chunk in self.translate(frame)]
        return [*chunks, DONE] if frame.get("type") == "done" else chunks

    def translate(self, frame: dict[str, Any]) -> list[Chunk]:
        kind = frame.get("type")
        if kind == "thinking":
            return [*self._end_text(), *self._open_reasoning(frame), self._delta(frame)]
        if kind == "token":
            return [*self._end_reasoning(), *self._open_text(frame), self._delta(frame)]
        if kind == "run_start":
            self.turn_id = frame.get("turnId")
            start: Chunk = {"type": "start"}
            if not self.continues_message and frame.get("turnId"):
                start["messageId"] = frame["turnId"]
            start["messageMetadata"] = {"contextId": frame["contextId"]}
            return [start, {"type": "start-step"}]
        if kind == "title":
            return [{"type": "data-title", "data": {"title": frame["title"]}, "transient": True}]
        if kind not in ("tool_call", "tool_result", "interrupt", "error", "done"):
            return []  # a frame kind this face does not show
        ended = [*self._end_text(), *self._end_reasoning()]
        if kind == "tool_call":
            return ended + self._tool_call(frame, self._call_id(frame))
        if kind == "tool_result":
            return [*ended, self._tool_result(frame, self._call_id(frame))]
        if kind == "interrupt":
            self.asked = True
            return ended + self._interrupt(frame["interrupt"])
        if kind == "error":
            return [*ended, {"type": "error", "errorText": frame["message"]}]
        return ended + self._finish(frame["stopReason"])

    def _open_text(self, frame: dict[str, Any]) -> list[Chunk]:
        if self.text_id is not None:
            return []
        self.text_id = f"text-{frame['seq']}"
        return [{"type": "text-start", "id": self.text_id}]

    def _open_reasoning(self, frame: dict[str, Any]) -> list[Chunk]:
        if self.reasoning_id is not None:
            return []
        self.reasoning_id = f"reasoning-{frame['seq']}"
        return [{"type": "reasoning-start", "id": self.reasoning_id}]

    def _delta(self, frame: dict[str, Any]) -> Chunk:
        if frame["type"] == "token":
            return {"type": "text-delta", "id": self.text_id, "delta": frame["delta"]}
        return {"type": "reasoning-delta", "id": self.reasoning_id, "delta": frame["delta"]}

    def _end_text(self) -> list[Chunk]:
        if self.text_id is None:
            return []
        ended, self.text_id = self.text_id, None
        return [{"type": "text-end", "id": ended}]

    def _end_reasoning(self) -> list[Chunk]:
        if self.reasoning_id is None:
            return []
        ended, self.reasoning_id = self.reasoning_id, None
        return [{"type": "reasoning-end", "id": ended}]

    def _call_id(self, frame: dict[str, Any]) -> str:
        """The call's id as the transcript's turns make it (`messages.tool_part`): call
        ids count from 1 in every run, and the turn id keeps them apart in a message that
        spans runs (a reply that waited for a decision goes on in a turn of its own)."""
        return f"{self.turn_id or frame['runId']}-{frame['callId']}"

    @staticmethod
    def _tool_call(frame: dict[str, Any], call_id: str) -> list[Chunk]:
        tool = {
            "toolCallId": call_id,
            "toolName": frame["name"],
            "dynamic": True,
            "providerExecuted": True,
        }
        return [
            {"type": "tool-input-start", **tool},
            {"type": "tool-input-available", **tool, "input": {}},
        ]

    @staticmethod
    def _tool_result(frame: dict[str, Any], call_id: str) -> Chunk:
        call = {
            "toolCallId": call_id,
            "dynamic": True,
            "providerExecuted": True,
        }
        if frame["ok"]:
            return {"type": "tool-output-available", **call, "output": None}
        return {"type": "tool-output-error", **call, "errorText": TOOL_FAILED}

    @staticmethod
    def _interrupt(request: dict[str, Any]) -> list[Chunk]:
        tool = {"toolCallId": request["interruptId"], "toolName": INTERRUPT_TOOL}
        return [
            {"type": "tool-input-start", **tool},
            {"type": "tool-input-available", **tool, "input": request},
        ]

    def _finish(self, stop_reason: str) -> list[Chunk]:
        finish_reason = {
            "end": "stop",
            "stopped": "other",
            "error": "error",
            # Waiting for the page's answer, or cut short by the server going down.
            "interrupted": "tool-calls" if self.asked else "interrupted",
        }.get(stop_reason, "other")
        chunks: list[Chunk] = [{"type": "finish-step"}]
        if stop_reason == "stopped":
            chunks.append({"type": "abort", "reason": "stopped"})
        chunks.append(
            {
                "type": "finish",
                "finishReason": finish_reason,
                "messageMetadata": {"stopReason": stop_reason},
            }
        )
        return chunks
