"""The public transcript as AG-UI messages: what a client reconnecting to a thread gets.

The ids are those a live run gives the same things (`events.py`), so a snapshot replaces
what a client holds of them rather than adding a copy. A turn of the user's is a user
message; a reply is its reasoning message (its thinking, if it showed any), then an
assistant message with its text and its tool calls (the name only, arguments `{}`), then
a tool message per finished call (empty, or "The tool failed."); a reply that showed
nothing is no message, as it was none live. A run in progress is not here: its events
follow the snapshot.
"""

from __future__ import annotations

from typing import Any

from thinwire.agui.events import TOOL_FAILED

__all__ = ["ag_ui_messages"]

Message = dict[str, Any]


def ag_ui_messages(transcript: dict[str, Any]) -> list[Message]:
    messages: list[Message] = []
    for turn in transcript["turns"]:
        if turn["role"] == "user":
            messages.append({"id": turn["id"], "role": "user", "content": turn["text"]})
        else:
            messages += reply(turn)
    return messages


def reply(turn: dict[str, Any]) -> list[Message]:
    if not (turn["text"] or turn["thinking"] or turn["activity"]):
        return []  # it showed nothing live (a run stopped at once, a question abandoned)
    turn_id = turn["id"]
    messages: list[Message] = []
    if turn["thinking"]:
        messages.append(
            {"id": f"{turn_id}-reasoning", "role": "reasoning", "content": turn["thinking"]}
        )
    said: Message = {
        "id": turn_id,
        "role": "assistant",
        "content": turn["text"],
        "metadata": {"thinwire": {"stopReason": turn["stopReason"]}},
    }
    calls = turn["activity"]
    if calls:
        said["toolCalls"] = [
            {
                "id": f"{turn_id}-{call['callId']}",
                "type": "function",
                "function": {"name": call["name"], "arguments": "{}"},
            }
            for call in calls
        ]
    messages.append(said)
    for call in calls:
        if call["ok"] is not None:  # None: it did not finish
            call_id = f"{turn_id}-{call['callId']}"
            messages.append(
                {
                    "id": f"{call_id}-result",
                    "role": "tool",
                    "toolCallId": call_id,
                    "content": "" if call["ok"] else TOOL_FAILED,
                    "metadata": {"thinwire": {"ok": call["ok"]}},
                }
            )
    return messages
