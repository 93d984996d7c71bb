"""The public transcript as `UIMessage`s: what a page gives `useChat` after a reload.

Each turn is a message with the turn's id, but for a reply that waited for a decision:
the turn that went on after the answer joins the message of the one that asked, as it did
live (its stream named no message of its own), so a page's list is the same after a
reload and `regenerate()` cuts what the server replaces. A turn's parts: a step start, its
thinking (one reasoning part: the transcript keeps a reply's thinking as one text, and
its text as another), its tools (dynamic tool parts run by the server, with the name and
state only, as the stream shows them), its text, and the decision it asked for, if any:
the `interrupt` tool part the stream showed, awaiting its output while the conversation
waits, with the person's answer as its output once answered (one the run was stopped
waiting for is left out: nothing answers it any more). A run in progress is not here:
resuming its stream brings it.
"""

from __future__ import annotations

from typing import Any

from thinwire.aisdk.chunks import INTERRUPT_TOOL, TOOL_FAILED

__all__ = ["ui_messages"]

Part = dict[str, Any]


def ui_messages(transcript: dict[str, Any]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for turn in transcript["turns"]:
        message = ui_message(turn)
        if goes_on(messages[-1] if messages else None, message):
            messages[-1]["parts"] += message["parts"]
            messages[-1]["metadata"] = message["metadata"]
        else:
            messages.append(message)
    pending = transcript.get("pendingInterrupt")
    if pending is not None and not shown(messages, pending["interruptId"]):
        # A turn stored before turns kept what they asked.
        if not messages or messages[-1]["role"] != "assistant":
            messages.append({"id": pending["interruptId"], "role": "assistant", "parts": []})
        messages[-1]["parts"].append(interrupt_part({"request": pending, "status": "waiting"}))
    return messages


def shown(messages: list[dict[str, Any]], interrupt_id: str) -> bool:
    return any(part.get("toolCallId") == interrupt_id for m in messages for part in m["parts"])


def goes_on(before: dict[str, Any] | None, message: dict[str, Any]) -> bool:
    """Whether `message` is a reply going on after a decision, in the exchange of the reply
    `before` (turn ids `turn-{exchange}-a0`, `-a1`, …)."""
    return (
        before is not None
        and before["role"] == message["role"] == "assistant"
        and before["id"].rpartition("-")[0] == message["id"].rpartition("-")[0]
    )


def ui_message(turn: dict[str, Any]) -> dict[str, Any]:
    if turn["role"] == "user":
        return {"id": turn["id"], "role": "user", "parts": [text_part(turn["text"])]}
    parts: list[Part] = [{"type": "step-start"}]
    if turn["thinking"]:
        parts.append({"type": "reasoning", "text": turn["thinking"], "state": "done"})
    parts += [tool_part(turn["id"], call) for call in turn["activity"]]
    if turn["text"]:
        parts.append(text_part(turn["text"]))
    asked = turn.get("asked")  # absent from a turn stored before turns kept it
    if asked is not None and asked["status"] != "stopped":
        parts.append(interrupt_part(asked))
    return {
        "id": turn["id"],
        "role": "assistant",
        "parts": parts,
        "metadata": {"stopReason": turn["stopReason"]},
    }


def text_part(text: str) -> Part:
    return {"type": "text", "text": text, "state": "done"}


def interrupt_part(asked: dict[str, Any]) -> Part:
    """The `interrupt` tool part as the stream showed it (the request is its input, its
    id the call's), with the person's answer as its output once answered."""
    request = asked["request"]
    part: Part = {
        "type": f"tool-{INTERRUPT_TOOL}",
        "toolCallId": request["interruptId"],
        "state": "input-available",
        "input": request,
    }
    if asked["status"] == "answered":
        return {**part, "state": "output-available", "output": asked["decision"]}
    return part


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
