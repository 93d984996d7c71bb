"""Finding tasks: in the caller's conversation's public transcript, never anywhere else.

Reading a transcript checks that the caller owns the conversation, so a task of another
principal is answered as one that does not exist (`context_not_found`). The tasks of a
conversation are its exchanges on the branch shown; the latest one may be running or
waiting for a decision, which the transcript says too. What a failed task's error said
is not in the transcript: it is read from the conversation's event log, while it keeps
the run (its latest two runs, for `event_ttl`). Nor is when a run in progress started:
its record says (`ActiveRun.started_at`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from thinwire.a2a.tasks import TaskView, parse_task_id, questions_over, run_end, run_start
from thinwire.errors import NotFound
from thinwire.server import AgentServer

__all__ = [
    "Caller",
    "Found",
    "conversation_tasks",
    "latest_task",
    "locate",
    "settle",
    "stamp",
]


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
    #: When the run working on it started, if one does (and it is known).
    started: float | None = None

    @property
    def said(self) -> str:
        """What the task's finished runs replied (the run in progress not included)."""
        return "".join(turn["text"] for turn in self.turns if turn["role"] == "assistant")

    @property
    def asked(self) -> list[dict[str, Any]]:
        """The questions the task's runs asked a person that are over, in order."""
        return questions_over(self.turns)

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
        return TaskView(self.context_id, self.task_id, self.said, self.started, self.asked)


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


async def run_started(caller: Caller, context_id: str, run_id: str | None) -> float | None:
    """When the run `run_id` started, as its conversation's record says while it runs."""
    context = await caller.server.context(caller.agent, context_id, caller.principal)
    active = context.record.active_run
    return active.started_at if active is not None and active.run_id == run_id else None


async def found_in(
    caller: Caller,
    context_id: str,
    read: dict[str, Any],
    grouped: dict[str, list[dict[str, Any]]],
    exchange: str,
) -> Found:
    latest = exchange == next(reversed(grouped))
    turns, running = grouped[exchange], read["activeRunId"] if latest else None
    started = None
    if running is not None:
        started = await run_started(caller, context_id, running)
        if started is None:  # not recorded (an older version's record), or just ended
            started = run_start(turns, None)
    return Found(
        context_id=context_id,
        task_id=f"{context_id}.{exchange}-u0",
        turns=turns,
        running=running,
        waiting_for=read["pendingInterrupt"] if latest else None,
        started=started,
    )


async def locate(caller: Caller, task_id: str) -> Found:
    """The task `task_id` names, or `TaskNotFoundError`."""
    context_id, user_turn = parse_task_id(task_id)
    read = await transcript(caller, context_id)
    grouped = exchanges(read["turns"])
    exchange = user_turn.rpartition("-")[0]
    if exchange not in grouped:
        raise NotFound("turn_not_found", "no such task in this conversation")
    return await found_in(caller, context_id, read, grouped, exchange)


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
    found = [
        await found_in(caller, context_id, read, grouped, exchange)
        for exchange in reversed(grouped)
    ]
    return await views(caller, found)


async def latest_task(caller: Caller, context_id: str) -> TaskView | None:
    """A conversation's latest task; None if it has none (cleared, or forgotten since it
    was listed)."""
    try:
        read = await transcript(caller, context_id)
        grouped = exchanges(read["turns"])
        if not grouped:
            return None
        latest = await found_in(caller, context_id, read, grouped, next(reversed(grouped)))
        [view] = await views(caller, [latest])
    except NotFound:
        return None
    return view


async def stamp(caller: Caller, view: TaskView, *, ending: bool = False) -> None:
    """Tell a view made of frames when its status was set, as the record says: once its
    run ended or asked (or, `ending`, is about to say so), the run's end; while it works,
    if the view does not know yet, when the run started."""
    if not view.task_id:
        return
    over = ending or view.ended
    try:
        if not over:
            if view.since is not None:
                return
            view.since = await run_started(caller, view.context_id, view.run_id)
            if view.since is not None:
                return
        turns = (await locate(caller, view.task_id)).turns
    except NotFound:  # the conversation was forgotten meanwhile: the time is not known
        return
    view.since = (run_end if over else run_start)(turns, view.reply_turn)
