"""The history (thinwire's message dicts, see docs/server.md) to and from the chat API's
messages, and the window of it a model is shown.

    history                                          chat API
    {"role": "system", "content"}                    {"role": "system", "content"}
    {"role": "user", "content", "data"?}             {"role": "user", "content"} (+ the data)
    {"role": "assistant", "content", "toolCalls":    {"role": "assistant", "content",
      [{"id", "name", "arguments": {...}}]}            "tool_calls": [{"id", "type": "function",
                                                        "function": {"name", "arguments": "{…}"}}]}
    {"role": "tool", "callId", "name", "arguments",  {"role": "tool", "tool_call_id",
      "ok", "output" | "error"}                        "content": output as JSON, or the error}
    {"role": "assistant", "content", "stopReason"}   the reply as the user saw it: sent to the
                                                     model only for a turn it did not write
                                                     itself (another agent's, a stopped one)

Every tool call is answered right after its assistant message, as the chat API requires:
one a stop cut short is answered as unfinished (`answered`).

A model's own turns (`model_turn`) carry no `stopReason`; the kit's summary of each run
(written when the run ends) does. Tool calls of agents that are not model-backed (no
`callId`) are not the model's, and are left out, as are messages of any other role (an
agent's own notes).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

__all__ = ["model_turn", "to_chat_messages"]


def model_turn(content: str, tool_calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A model's turn as the history keeps it."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["toolCalls"] = [
            {"id": call["id"], "name": call["name"], "arguments": call["arguments"]}
            for call in tool_calls
        ]
    return message


def to_chat_messages(history: Sequence[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """The chat messages for the model: the system prompt, then the latest whole turns (a
    user message and what followed it) that fit in `window` chat messages, the latest
    turn's counted with the earlier ones — the latest turn always, however long, so no
    tool call is shown without its result. The turn
    before the latest, when it does not fit whole, is shown in brief (`in_brief`) if that
    fits: a reply that ended at `max_steps` is often that long. It reads the history from
    the end, as far back as the window goes."""
    system = []
    for message in history:
        if message.get("role") != "system":
            break
        system.append(chat_message(message))
    shown: list[dict[str, Any]] = []
    turns = 0
    turn: list[dict[str, Any]] = []
    for seen, message in enumerate(reversed(history)):
        if seen >= len(history) - len(system):
            break  # the system prompt, taken already
        turn.append(message)
        if message.get("role") != "user":
            continue
        chat = chat_turn(turn[::-1])
        if shown and len(shown) + len(chat) > window:
            brief = in_brief(turn[::-1]) if turns == 1 else []
            if brief and len(shown) + len(brief) <= window:
                shown = brief + shown
            break
        shown = chat + shown
        turns += 1
        turn = []
    return [*system, *shown]


#: How a tool call ended, as the model is told of one whose result it is not shown.
ENDED: dict[bool | None, str] = {True: "finished", False: "failed", None: "did not finish"}


def in_brief(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn in two messages: its user message, and its reply as the user saw it with
    the tools it called named, but not their arguments or results."""
    asked, rest = messages[0], messages[1:]
    reply = next((m for m in rest if m.get("role") == "assistant" and "stopReason" in m), None)
    said = (
        reply.get("content") or ""
        if reply is not None
        else "".join(m.get("content") or "" for m in rest if m.get("role") == "assistant")
    )
    results = {m["callId"]: m.get("ok") for m in rest if m.get("role") == "tool" and "callId" in m}
    calls = Counter(
        (call["name"], ENDED.get(results.get(call["id"]), ENDED[None]))
        for m in rest
        if m.get("role") == "assistant"
        for call in m.get("toolCalls") or ()
    )
    named = ", ".join(
        f"{name} ({outcome}, {count} times)" if count > 1 else f"{name} ({outcome})"
        for (name, outcome), count in calls.items()
    )
    note = f"[Left out for length: the tools it called, {named}, and what they returned.]"
    content = with_note(said, note if calls else "")
    chat = [chat_message(asked)]
    if content:  # the chat API refuses an empty assistant message
        chat.append({"role": "assistant", "content": content})
    return chat


def chat_turn(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One turn's chat messages: the model's own where it wrote them, else the kit's
    summary of the reply (another agent's, or a run stopped before the model answered)."""
    own = any(m.get("role") == "assistant" and "stopReason" not in m for m in messages)
    out = []
    for message in messages:
        if message.get("role") not in ("user", "assistant", "tool"):
            continue  # an agent's own notes are not the model's to read
        summary = message["role"] == "assistant" and "stopReason" in message
        if summary and (own or not (message.get("content") or message.get("calls"))):
            continue
        if message["role"] == "tool" and "callId" not in message:
            continue
        if message["role"] == "assistant" and not (
            message.get("content") or message.get("toolCalls") or message.get("calls")
        ):
            continue  # the model said nothing; the chat API refuses an empty turn
        out.append(chat_message(message))
    return answered(out)


def cut_off(calls: list[dict[str, Any]] | None) -> str:
    """What the model reads of the tools a reply called before its server went down (the
    reply's history message names them; what they returned was never saved)."""
    if not calls:
        return ""
    named = ", ".join(
        f"{call['name']} ({ENDED.get(call.get('ok'), ENDED[None])})" for call in calls
    )
    return (
        f"[The server went down during this reply. It had called: {named}; what they "
        "returned was not kept.]"
    )


def with_note(content: str, note: str) -> str:
    """A message's content with a note of ours after it, a blank line between them; the
    note alone when the content is empty (no blank lines to start a message with)."""
    return "\n\n".join(part for part in (content, note) if part)


#: What the model reads for a call whose run was stopped or killed before it returned.
UNFINISHED = "error: the run ended before this call returned; it may have partly run"


def answered(chat: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat messages with every tool call answered right after the assistant message
    that made it, as the chat API requires (it refuses the whole request otherwise, so a
    stop during a tool would break every later send): a call that never returned gets an
    answer saying so, and a result without its call is left out."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for message in chat:
        if message["role"] == "tool":
            if message["tool_call_id"] in pending:
                pending.remove(message["tool_call_id"])
                out.append(message)
            continue
        out += [{"role": "tool", "tool_call_id": id, "content": UNFINISHED} for id in pending]
        pending = [call["id"] for call in message.get("tool_calls", [])]
        out.append(message)
    out += [{"role": "tool", "tool_call_id": id, "content": UNFINISHED} for id in pending]
    return out


def chat_message(message: dict[str, Any]) -> dict[str, Any]:
    role = message.get("role")
    if role == "system":
        return {"role": "system", "content": message.get("content", "")}
    if role == "user":
        content = message.get("content") or ""
        if message.get("data"):
            data = json.dumps(message["data"], ensure_ascii=False)
            content = with_note(content, f"[The page sent this with the message: {data}]")
        return {"role": "user", "content": content}
    if role == "tool":
        body = (
            json.dumps(message.get("output"), ensure_ascii=False)
            if message.get("ok")
            else f"error: {message.get('error', 'the tool failed')}"
        )
        return {"role": "tool", "tool_call_id": message["callId"], "content": body}
    content = with_note(message.get("content") or "", cut_off(message.get("calls")))
    chat: dict[str, Any] = {"role": "assistant", "content": content or None}
    if message.get("toolCalls"):
        chat["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call["arguments"], str)
                    else json.dumps(call["arguments"], ensure_ascii=False),
                },
            }
            for call in message["toolCalls"]
        ]
    return chat
