"""Finding tasks: in the caller's conversation's public transcript, never anywhere else.

Reading a transcript checks that the caller owns the conversation, so a task of another
principal is answered as one that does not exist (`context_not_found`). The tasks of a
conversation are its exchanges on the branch shown; the latest one may be running or
waiting for a decision, which the transcript says too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from thinwire.a2a.tasks import TaskView, parse_task_id
from thinwire.errors import NotFound
from thinwire.server import AgentServer

__all__ = ["Caller", "Found", "conversation_tasks", "latest_task", "locate"]


@dataclass(frozen=True)
class Caller:
    """Who calls which agent, and the JSON-RPC id their answer carries."""

    server: AgentServer
    agent: str
    principal: str
    rpc_id: str | int | None


@dataclass(frozen=True)
class Found:
    """A task of the caller's and its exchange's public turns."""

    context_id: str
    task_id: str
    turns: list[dict[str, Any]]
    #: The run working on the task now, if any.
    running: str | None
    #: The public request of the decision the task waits for, if it does.
    waiting_for: dict[str, Any] | None

    @property
    def said(self) -> str:
        """What the task's finished runs replied (the run in progress not included)."""
        return "".join(turn["text"] for turn in self.turns if turn["role"] == "assistant")

    def settled(self) -> TaskView:
        return TaskView.settled(self.context_id, self.task_id, self.turns, self.waiting_for)

    def view(self) -> TaskView:
        """The task, without the live reply of a run in progress."""
        if self.running is None:
            return self.settled()
        return TaskView(self.context_id, self.task_id, self.said)


async def transcript(caller: Caller, context_id: str) -> dict[str, Any]:
    body = await caller.server.read_transcript(caller.agent, context_id, caller.principal)
    read: dict[str, Any] = json.loads(body)
    return read


def exchanges(turns: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The turns of each exchange, in order, by the id their turns share (`turn-…`)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for turn in turns:
        grouped.setdefault(turn["id"].rpartition("-")[0], []).append(turn)
    return grouped


def found_in(
    context_id: str,
    read: dict[str, Any],
    grouped: dict[str, list[dict[str, Any]]],
    exchange: str,
) -> Found:
    latest = exchange == next(reversed(grouped))
    return Found(
        context_id=context_id,
        task_id=f"{context_id}.{exchange}-u0",
        turns=grouped[exchange],
        running=read["activeRunId"] if latest else None,
        waiting_for=read["pendingInterrupt"] if latest else None,
    )


async def locate(caller: Caller, task_id: str) -> Found:
    """The task `task_id` names, or `TaskNotFoundError`."""
    context_id, user_turn = parse_task_id(task_id)
    read = await transcript(caller, context_id)
    grouped = exchanges(read["turns"])
    exchange = user_turn.rpartition("-")[0]
    if exchange not in grouped:
        raise NotFound("turn_not_found", "no such task in this conversation")
    return found_in(context_id, read, grouped, exchange)


async def conversation_tasks(caller: Caller, context_id: str) -> list[TaskView]:
    """Every task of a conversation's branch shown, the newest first (without the live
    reply of one in progress)."""
    read = await transcript(caller, context_id)
    grouped = exchanges(read["turns"])
    return [found_in(context_id, read, grouped, exchange).view() for exchange in reversed(grouped)]


async def latest_task(caller: Caller, context_id: str) -> TaskView | None:
    """A conversation's latest task; None if it has none (cleared, or forgotten since it
    was listed)."""
    try:
        read = await transcript(caller, context_id)
    except NotFound:
        return None
    grouped = exchanges(read["turns"])
    if not grouped:
        return None
    return found_in(context_id, read, grouped, next(reversed(grouped))).view()
