"""Conversations kept whole, as earlier versions stored them — one history and one
transcript array — cut into exchanges: what a store moves over on the first save."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["exchanges_of"]

Message = dict[str, Any]


def exchanges_of(
    history: Sequence[Message], transcript: Sequence[dict[str, Any]]
) -> tuple[list[Message], list[tuple[list[Message], list[dict[str, Any]]]]]:
    """The preamble (messages before the first user message) and, for each user message,
    the messages and the public turns from it to the next."""
    preamble: list[Message] = []
    histories: list[list[Message]] = []
    for message in history:
        if message.get("role") == "user":
            histories.append([message])
        elif histories:
            histories[-1].append(message)
        else:
            preamble.append(message)
    turns: list[list[dict[str, Any]]] = []
    for turn in transcript:
        if turn.get("role") == "user" or not turns:
            turns.append([turn])
        else:
            turns[-1].append(turn)
    count = max(len(histories), len(turns))
    histories += [[] for _ in range(count - len(histories))]
    turns += [[] for _ in range(count - len(turns))]
    return preamble, list(zip(histories, turns, strict=True))
