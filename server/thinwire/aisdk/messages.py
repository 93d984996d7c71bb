"""The public transcript as `UIMessage`s: what a page gives `useChat` after a reload.

Each turn is a message with the turn's id. A reply's parts: a step start, its thinking
(one reasoning part), its tools (dynamic tool parts run by the server, with the name and
state only, as the stream shows them) and its text. A decision the conversation waits
for is an `interrupt` tool part awaiting its output, in the reply that asked. A run in
progress is not here: resuming its stream brings it.
"""

from __future__ import annotations

from typing import Any

from thinwire.aisdk.chunks import INTERRUPT_TOOL, TOOL_FAILED

__all__ = ["ui_messages"]

Part = dict[str, Any]


def ui_messages(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    messages = [ui_message(turn) for turn in transcript["turns"]]
    pending = transcript.get("pendingInterrupt")
    if pending is not None:
        if not messages or messages[-1]["role"] != "assistant":
            messages.append({"id": pending["interruptId"], "role": "assistant", "parts": []})
        messages[-1]["parts"].append(
            {
                "type": f"tool-{INTERRUPT_TOOL}",
                "toolCallId": pending["interruptId"],
                "state": "input-available",
                "input": pending,
            }
        )
    return messages


def ui_message(turn: dict[str, Any]) -> dict[str, Any]:
    if turn["role"] == "user":
        return {"id": turn["id"], "role": "user", "parts": [text_part(turn["text"])]}
    parts: list[Part] = [{"type": "step-start"}]
    if turn["thinking"]:
        parts.append({"type": "reasoning", "text": turn["thinking"], "state": "done"})
    parts += [tool_part(turn["id"], call) for call in turn["activity"]]
    if turn["text"]:
        parts.append(text_part(turn["text"]))
    return {
        "id": turn["id"],
        "role": "assistant",
        "parts": parts,
        "metadata": {"stopReason": turn["stopReason"]},
    }


def text_part(text: str) -> Part:
    return {"type": "text", "text": text, "state": "done"}


def tool_part(turn_id: str, call: dict[str, Any]) -> Part:
    part: Part = {
        "type": "dynamic-tool",
        "toolName": call["name"],
        "toolCallId": f"{turn_id}-{call['callId']}",
        "providerExecuted": True,
        "input": {},
    }
    if call["ok"] is None:  # it did not finish
        return {**part, "state": "input-available"}
    if call["ok"]:
        return {**part, "state": "output-available", "output": None}
    return {**part, "state": "output-error", "errorText": TOOL_FAILED}
