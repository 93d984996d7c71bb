"""What a chat model is to a ChatAgent: given the messages and the tools, it streams what
it says and thinks to an `Emitter` and returns its turn, as JSON (a run records it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NotRequired, Protocol, TypedDict

from thinwire.jsonvalues import a_value_of

__all__ = ["ChatModel", "Emitter", "ModelTurn", "ToolCall"]


class ToolCall(TypedDict):
    id: str
    name: str
    #: As the model sent it: the text of a JSON object (which may not even be JSON), a
    #: str such as '{"query": "tides"}', not a dict.
    arguments: str


class ModelTurn(TypedDict):
    content: str
    toolCalls: list[ToolCall]
    #: Why the model stopped ("stop", "tool_calls", "length", …), as it said; None or
    #: left out when it did not say.
    finishReason: NotRequired[str | None]
    #: Tokens of this call: {"inputTokens", "outputTokens"}; None or left out when unknown.
    usage: NotRequired[dict[str, int] | None]


class Emitter(Protocol):
    """Where a model's deltas go: the user's screen (a run's `say` and `think`)."""

    async def say(self, delta: str) -> None: ...

    async def think(self, delta: str) -> None: ...


class ChatModel(Protocol):
    #: The model's name, as its server knows it (recorded with the usage).
    name: str

    async def complete(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]],
        emit: Emitter,
    ) -> ModelTurn:
        """One call: stream the answer's deltas to `emit`, return the whole turn."""
        ...


def checked_turn(turn: object, model: object) -> ModelTurn:
    """What `model.complete()` returned, as a whole `ModelTurn` (a key left out: None),
    or a `TypeError` naming the method and the field that is wrong: a turn is recorded
    and read back, so it fails where it comes back, not deep in the loop."""
    said = f"{type(model).__name__}.complete() returned"
    if not isinstance(turn, dict):
        raise TypeError(
            f"{said} {a_value_of(turn)}, not a ModelTurn (a dict of content, toolCalls, "
            "finishReason and usage)"
        )
    for key in ("content", "toolCalls"):
        if key not in turn:
            raise TypeError(f"{said} a ModelTurn without {key}")
    content, calls = turn["content"], turn["toolCalls"]
    finish, usage = turn.get("finishReason"), turn.get("usage")
    if not isinstance(content, str):
        raise TypeError(f"{said} a ModelTurn whose content is {a_value_of(content)}, not a str")
    if not isinstance(calls, list):
        raise TypeError(f"{said} a ModelTurn whose toolCalls is {a_value_of(calls)}, not a list")
    if finish is not None and not isinstance(finish, str):
        raise TypeError(
            f"{said} a ModelTurn whose finishReason is {a_value_of(finish)}, not a str or None"
        )
    tokens = None if usage is None else counted(usage)
    if usage is not None and tokens is None:
        raise TypeError(
            f'{said} a ModelTurn whose usage is not {{"inputTokens": int, "outputTokens": '
            "int} or None (None when the tokens are unknown)"
        )
    return {
        "content": content,
        "toolCalls": [
            checked_call(call, f"{said} a ModelTurn", index) for index, call in enumerate(calls)
        ],
        "finishReason": finish,
        "usage": tokens,
    }


def checked_call(call: object, said: str, index: int) -> ToolCall:
    where = f"toolCalls[{index}]"
    if not isinstance(call, dict):
        raise TypeError(
            f'{said} whose {where} is {a_value_of(call)}, not an object {{"id", "name", '
            '"arguments"}'
        )
    for key in ("id", "name", "arguments"):
        if key not in call:
            raise TypeError(f"{said} with {where} without {key}")
        if not isinstance(call[key], str):
            also = ': the JSON text the model wrote, such as \'{"query": "tides"}\''
            raise TypeError(
                f"{said} whose {where}.{key} is {a_value_of(call[key])}, not a str"
                + (also if key == "arguments" else "")
            )
    return {"id": call["id"], "name": call["name"], "arguments": call["arguments"]}


def counted(usage: object) -> dict[str, int] | None:
    """A model call's tokens, from `usage`: its two counts from 0, by their names."""
    if not isinstance(usage, dict):
        return None
    sent, answered = usage.get("inputTokens"), usage.get("outputTokens")
    if type(sent) is int and type(answered) is int and sent >= 0 and answered >= 0:
        return {"inputTokens": sent, "outputTokens": answered}
    return None
