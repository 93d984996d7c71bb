"""What a person is asked when a framework interrupts with a value meant for them:
LangGraph's `interrupt(value)`, a Strands hook's `event.interrupt(name, reason=...)`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Question", "question_of"]

#: The prompt when the value gives none.
ASKED = "The assistant needs your answer."


@dataclass(frozen=True)
class Question:
    """What a person is asked. Public: sent as it is."""

    prompt: str
    options: list[str] | None = None
    payload: Any = None


def question_of(value: Any) -> Question:
    """A string is the prompt; a dict gives `prompt` (or `question`) and `options` (a list
    of strings), and is sent whole as the payload; anything else is the payload."""
    if isinstance(value, str):
        return Question(value)
    if isinstance(value, dict):
        prompt = value.get("prompt") or value.get("question")
        options = value.get("options")
        valid = isinstance(options, list) and all(isinstance(o, str) for o in options)
        return Question(str(prompt or ASKED), options if valid else None, value)
    return Question(ASKED, payload=value)
