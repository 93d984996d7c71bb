"""Finding tasks: in the caller's conversation's public transcript, never anywhere else.

Reading a transcript checks that the caller owns the conversation, so a task of another
principal is answered as one that does not exist (`context_not_found`). The tasks of a
conversation are its exchanges on the branch shown; the latest one may be running or
waiting for a decision, which the transcript says too. What a failed task's error said
is not in the transcript: it is read from the conversation's event log, while it keeps
the run (its latest two runs, for `event_ttl`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from thinwire.a2a.tasks import TaskView, parse_task_id
from thinwire.errors import NotFound
from thinwire.server import AgentServer

__all__ = ["Caller", "Found", "conversation_tasks", "latest_task", "locate", "settle"]


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

    @property
    def exchange(self) -> str:
        """The id its exchange's turns share (`turn-…`)."""
        return self.task_id.rpartition(".")[2].rpartition("-")[0]

    @property
    def erred(self) -> bool:
        """Its last run is over, and ended with an error."""
        replies = [turn for turn in self.turns if turn["role"] == "assistant"]
        return self.running is None and bool(replies) and replies[-1]["stopReason"] == "error"

    def settled(self, failure: dict[str, Any] | None = None) -> TaskView:
        return TaskView.settled(
            self.context_id, self.task_id, self.turns, self.waiting_for, failure
        )

    def view(self, failure: dict[str, Any] | None = None) -> TaskView:
        """The task, without the live reply of a run in progress."""
        if self.running is None:
            return self.settled(failure)
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


async def failures(caller: Caller, context_id: str) -> dict[str, dict[str, Any]]:
    """The `error` frame each exchange's latest run ended with, by exchange, of the runs
    the conversation's event log keeps."""
    server = caller.server
    context = await server.context(caller.agent, context_id, caller.principal)
    exchange_of: dict[str, str] = {}  # run id -> exchange
    ended: dict[str, dict[str, Any] | None] = {}
    for _, data in await server.kept_frames(context):
        frame = json.loads(data)
        if frame["type"] == "run_start":
            exchange = exchange_of[frame["runId"]] = (frame["turnId"] or "").rpartition("-")[0]
            ended[exchange] = None  # the exchange's latest run so far: its error counts
        elif frame["type"] == "error" and frame["runId"] in exchange_of:
            ended[exchange_of[frame["runId"]]] = frame
    return {exchange: frame for exchange, frame in ended.items() if frame is not None}


async def settle(caller: Caller, found: Found) -> TaskView:
    """A task no run is working on, as `Found.settled`; a failed one with its error."""
    if not found.erred:
        return found.settled()
    return found.settled((await failures(caller, found.context_id)).get(found.exchange))


async def views(caller: Caller, found: list[Found]) -> list[TaskView]:
    """Tasks of one conversation, as `Found.view`; the failed ones with their errors, read
    once for all."""
    if not any(task.erred for task in found):
        return [task.view() for task in found]
    failed = await failures(caller, found[0].context_id)
    return [task.view(failed.get(task.exchange)) for task in found]


async def conversation_tasks(caller: Caller, context_id: str) -> list[TaskView]:
    """Every task of a conversation's branch shown, the newest first (without the live
    reply of one in progress)."""
    read = await transcript(caller, context_id)
    grouped = exchanges(read["turns"])
    return await views(
        caller, [found_in(context_id, read, grouped, exchange) for exchange in reversed(grouped)]
    )


async def latest_task(caller: Caller, context_id: str) -> TaskView | None:
    """A conversation's latest task; None if it has none (cleared, or forgotten since it
    was listed)."""
    try:
        read = await transcript(caller, context_id)
        grouped = exchanges(read["turns"])
        if not grouped:
            return None
        [view] = await views(caller, [found_in(context_id, read, grouped, next(reversed(grouped)))])
    except NotFound:
        return None
    return view
