"""The public transcript as AG-UI messages: what a client reconnecting to a thread gets.

The ids are those a live run gives the same things (`events.py`), so a snapshot replaces
what a client holds of them rather than adding a copy. A turn of the user's is a user
message; a reply is its reasoning message (its thinking, if it showed any), then an
assistant message with its text and its tool calls (the name only, arguments `{}`), then
a tool message per finished call (empty, or "The tool failed."); a reply that showed
nothing is no message, as it was none live. A run in progress is not here: its events
follow the snapshot.

A reply that asked a person keeps the question on its assistant message (one even if it
said nothing), under `metadata.thinwire`, in the protocol's own shapes: `interrupt`, the
`Interrupt` its run finished with, and once the question is over, `resume`, the entry
that ended it as a client sends one (`resolved` with the decision as its `payload`, or
`cancelled` for a run stopped while it waited). Live, a client holds them as its
`pendingInterrupts` and the `resume` it sent; reloaded, they stay where they were asked.
"""

from __future__ import annotations

from typing import Any

from thinwire.agui.events import TOOL_FAILED, Event, interrupt_of

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
    asked = turn.get("asked")  # absent from a turn stored before turns kept it
    if not (turn["text"] or turn["thinking"] or turn["activity"] or asked):
        return []  # it showed nothing live (a run stopped at once)
    turn_id = turn["id"]
    messages: list[Message] = []
    if turn["thinking"]:
        messages.append(
            {"id": f"{turn_id}-reasoning", "role": "reasoning", "content": turn["thinking"]}
        )
    thinwire: dict[str, Any] = {"stopReason": turn["stopReason"]}
    if asked is not None:
        thinwire |= question(asked)
    said: Message = {
        "id": turn_id,
        "role": "assistant",
        "content": turn["text"],
        "metadata": {"thinwire": thinwire},
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


def question(asked: dict[str, Any]) -> dict[str, Event]:
    """What a reply asked, as the run's `RUN_FINISHED` carried it, and the resume entry
    that ended it, if it is over: the public request and the person's own answer only."""
    request = asked["request"]
    shown = {"interrupt": interrupt_of(request)}
    if asked["status"] == "answered":
        resume = {"status": "resolved", "payload": asked["decision"]}
    elif asked["status"] == "stopped":
        resume = {"status": "cancelled"}
    else:  # it waits: the run's end at `connect` asks it again
        return shown
    return {**shown, "resume": {"interruptId": request["interruptId"], **resume}}
