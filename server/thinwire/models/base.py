"""What a chat model is to a ChatAgent: given the messages and the tools, it streams what
it says and thinks to an `Emitter` and returns its turn, as JSON (a run records it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypedDict

__all__ = ["ChatModel", "Emitter", "ModelTurn", "ToolCall"]


class ToolCall(TypedDict):
    id: str
    name: str
    #: As the model sent it: a JSON object in text (which may not even be JSON).
    arguments: str


class ModelTurn(TypedDict):
    content: str
    toolCalls: list[ToolCall]
    #: Why the model stopped ("stop", "tool_calls", "length", …), as it said.
    finishReason: str | None
    #: Tokens of this call: {"inputTokens", "outputTokens"}, when the server said.
    usage: dict[str, int] | None


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
