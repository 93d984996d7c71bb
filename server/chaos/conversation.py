"""One client's conversation: every send it made, and the check of the server's
transcript against what the server acknowledged.

The promise checked: every turn whose stream reached `done` with stop reason `end` is in
the transcript exactly once, in the order sent, with the reply the client was given.
Beyond it, anything at all in the transcript must make sense: no user turn twice, none
the client never sent, none out of order, and each followed by the agent's reply (a
turn cut by a crash is recorded as `interrupted`, not left without a reply).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from chaos.client import Exchange

__all__ = ["Audit", "Conversation", "audit"]


@dataclass
class Conversation:
    owner: str
    context_id: str | None = None
    exchanges: list[Exchange] = field(default_factory=list)

    def record(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)
        if self.context_id is None:
            self.context_id = exchange.run_context

    def sent(self) -> list[Exchange]:
        """The sends that reached this conversation (or may have)."""
        if self.context_id is None:
            return []
        return [
            e
            for e in self.exchanges
            if e.context_id == self.context_id or e.run_context == self.context_id
        ]

    @property
    def acknowledged(self) -> list[Exchange]:
        return [e for e in self.sent() if e.acknowledged]


@dataclass
class Audit:
    kept: int = 0
    lost: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def audit(conversation: Conversation, turns: list[dict[str, Any]]) -> Audit:
    result = Audit()
    sent = conversation.sent()
    order = {e.text: i for i, e in enumerate(sent)}
    where = conversation.context_id
    users = [(i, t["text"]) for i, t in enumerate(turns) if t["role"] == "user"]
    for text, count in Counter(text for _, text in users).items():
        if count > 1:
            result.problems.append(f"{where}: user turn {text!r} is there {count} times")
        if text not in order:
            result.problems.append(f"{where}: user turn {text!r} was never sent")
    ranks = [order[text] for _, text in users if text in order]
    if ranks != sorted(ranks):
        result.problems.append(f"{where}: user turns out of the order sent")
    for i, text in users:
        reply = turns[i + 1] if i + 1 < len(turns) else None
        if reply is None or reply["role"] != "assistant":
            result.problems.append(f"{where}: user turn {text!r} has no reply after it")
    for exchange in conversation.acknowledged:
        result.kept += 1
        missing = kept_reply(exchange, turns)
        if missing is not None:
            result.kept -= 1
            result.lost.append(f"{where}: acknowledged {exchange.text!r} {missing}")
    return result


def kept_reply(exchange: Exchange, turns: list[dict[str, Any]]) -> str | None:
    """None when the acknowledged turn is in `turns` as acknowledged; else what is wrong."""
    done = exchange.done
    assert done is not None
    at = [i for i, t in enumerate(turns) if t["role"] == "user" and t["text"] == exchange.text]
    if not at:
        return "is missing"
    reply = turns[at[0] + 1] if at[0] + 1 < len(turns) else None
    if reply is None or reply["role"] != "assistant":
        return "has lost its reply"
    if reply["text"] != done["text"] or reply["stopReason"] != "end":
        return f"has another reply: {reply['stopReason']} {reply['text'][:60]!r}"
    return None
