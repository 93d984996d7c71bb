"""A2A tasks over thinwire's exchanges, and how a run's frames become task events.

A task is one user message and what answers it: the run the message starts, and one
more run for each decision that resumes it after an interrupt. Its id names the
conversation and the user's turn, `{contextId}.{userTurnId}`, so it stays the same across
those runs and finds its conversation (whose owner is checked) without a table of its
own. Its state is folded from the frames of its current run (`TaskView`), on top of what
its earlier runs said, which the public transcript keeps.

    frame                        A2A
    run_start                    (the task's ids)
    token                        artifactUpdate: the "reply" artifact, appended to
    thinking                     statusUpdate working, an agent message holding the delta
                                 (its metadata {"thinwire": {"kind": "thinking"}})
    tool_call                    statusUpdate working, metadata {"thinwire": {"tool": name}}
    interrupt + done interrupted statusUpdate input-required, an agent message holding
                                 the public request (prompt as text, the rest as data)
    error + done error           artifactUpdate (the whole reply), statusUpdate failed
                                 whose message is the error's public text and code
    done interrupted, no ask     the same, with the code `run_interrupted` (its server
                                 stopped or died mid-run)
    done end / stopped           artifactUpdate (the whole reply), statusUpdate
                                 completed / canceled
    title, tool_result           nothing

A task no run works on is read from its exchange's public turns instead, with the same
status: a failed one's message is its run's `error` frame, while the event log keeps it.

A task's `history` is what its questions to a person exchanged, once each is over (the
one it waits for is its status message, as A2A moves a status message into the history
when the next status replaces it): the agent message its input-required status carried,
then, if answered, the person's answer as a user message (a text part for a decision that
is a string, else a data part). It is read from the transcript's `asked`, which keeps the
public request and the person's own answer only. The user's messages and the reply are
not in it: the client sent the one, and the artifact is the other.

A status's `timestamp` is when the status was set, as the record says, never when it is
read: while a run works, when the run started; once it ended or asked, its reply turn's
end. Frames carry no time, so a view made of them is told (`since`, `lookup.stamp`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from thinwire.a2a import models
from thinwire.a2a.errors import INVALID_PARAMS, RpcError
from thinwire.branches import TURN_ID
from thinwire.ids import CONTEXT_ID

__all__ = [
    "TaskView",
    "parse_task_id",
    "questions_over",
    "run_end",
    "run_start",
    "task_id_of",
    "timestamp",
]

TASK_ID = re.compile(rf"({CONTEXT_ID.pattern})\.(turn-[0-9a-f]{{12}}-u0)")
#: The artifact that holds the reply.
REPLY = "reply"
#: How a run that ended without asking anything leaves its task.
ENDED_AS: dict[str, models.TaskState] = {
    "end": "TASK_STATE_COMPLETED",
    "stopped": "TASK_STATE_CANCELED",
    "error": "TASK_STATE_FAILED",
    "interrupted": "TASK_STATE_FAILED",  # its process stopped or died mid-run
}
#: The failure of a run its process did not see to the end (stop reason `interrupted`,
#: without asking anything): what an `error` frame would have said.
CUT_SHORT = {
    "code": "run_interrupted",
    "message": "The run was interrupted: its server stopped before the run ended.",
    "retryable": True,
}


def task_id_of(context_id: str, turn_id: str) -> str:
    """The task of a turn: its exchange's user turn, in its conversation."""
    match = TURN_ID.fullmatch(turn_id)
    assert match is not None, "turn ids are minted by the server"
    return f"{context_id}.turn-{match[1]}{match[2]}-u0"


def parse_task_id(task_id: str) -> tuple[str, str]:
    """The conversation and the user turn a task id names."""
    match = TASK_ID.fullmatch(task_id)
    if match is None:
        raise RpcError(INVALID_PARAMS, "invalid_request", "id: not a task id this server gave")
    return match[1], match[2]


def last_change(turns: Sequence[dict[str, Any]]) -> float | None:
    """When an exchange last changed, as its turns' times say: its last reply's end (or
    start), else its message's. It stays put however often the task is read."""
    for turn in reversed(turns):
        meta = turn.get("meta") or {}
        if moment := meta.get("finishedAt") or meta.get("startedAt"):
            return float(moment)
    return None


def up_to(
    turns: Sequence[dict[str, Any]], reply_turn: str | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The turns of an exchange before a run's reply turn, and that turn (None if the run
    added none: later runs then added none either)."""
    for index, turn in enumerate(turns):
        if turn["id"] == reply_turn:
            return list(turns[:index]), turn
    return list(turns), None


def run_start(turns: Sequence[dict[str, Any]], reply_turn: str | None) -> float | None:
    """When the run writing `reply_turn` started, as an exchange's turns say: its reply's
    start, else the exchange's last change before it (a first run starts as its message
    is taken). For a run whose record does not say (`ActiveRun.started_at`)."""
    before, reply = up_to(turns, reply_turn)
    started = ((reply or {}).get("meta") or {}).get("startedAt")
    return float(started) if started else last_change(before)


def run_end(turns: Sequence[dict[str, Any]], reply_turn: str | None) -> float | None:
    """When the run writing `reply_turn` ended or asked: its reply's end, else (it showed
    nothing) the exchange's last change before it; as a task read later says."""
    before, reply = up_to(turns, reply_turn)
    return last_change([*before, reply] if reply is not None else before)


def questions_over(turns: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an exchange's replies asked a person and is over (answered, or stopped while
    it waited), in order: each reply's `asked` (absent from a turn stored before turns
    kept it)."""
    asked = (turn.get("asked") for turn in turns if turn["role"] == "assistant")
    return [question for question in asked if question and question["status"] != "waiting"]


def timestamp(seconds: float | None = None) -> str:
    moment = datetime.fromtimestamp(time.time() if seconds is None else seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TaskView:
    """One task as its A2A client sees it, kept current frame by frame (`apply`)."""

    def __init__(
        self,
        context_id: str = "",
        task_id: str = "",
        said: str = "",
        since: float | None = None,
        asked: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.context_id = context_id
        self.task_id = task_id
        #: The questions its earlier runs asked that are over (`questions_over`).
        self.asked = list(asked)
        #: The run the frames come from, and the reply turn it writes (its `run_start`'s).
        self.run_id: str | None = None
        self.reply_turn: str | None = None
        #: The whole reply so far: what the task's earlier runs said, then this one.
        self.text = said
        self.state: models.TaskState = "TASK_STATE_WORKING"
        self.message: models.Message | None = None
        self.interrupt: dict[str, Any] | None = None
        self.failure: dict[str, Any] | None = None
        #: When the status was set (None: not known; a read then says its own time).
        self.since = since
        #: The run's `done` was taken in: its end is `since`, once told.
        self.ended = False

    @classmethod
    def settled(
        cls,
        context_id: str,
        task_id: str,
        turns: Sequence[dict[str, Any]],
        waiting_for: dict[str, Any] | None,
        failure: dict[str, Any] | None = None,
    ) -> TaskView:
        """A task no run is working on, from its exchange's public turns; `waiting_for`
        the pending interrupt if the task waits for it, `failure` the `error` frame its
        last run ended with, if known."""
        replies = [turn for turn in turns if turn["role"] == "assistant"]
        said = "".join(turn["text"] for turn in replies)
        view = cls(context_id, task_id, said, asked=questions_over(turns))
        view.since = last_change(turns)
        if waiting_for is not None:
            view.ask(waiting_for)
        elif replies:
            stop_reason = replies[-1]["stopReason"] or "end"
            view.state = ENDED_AS[stop_reason]
            view.failure = CUT_SHORT if stop_reason == "interrupted" else failure
            if view.failure is not None:
                view.fail(view.failure)
        else:
            view.state = "TASK_STATE_COMPLETED"  # the agent said nothing
        return view

    def task(self, *, artifacts: bool = True, history_length: int | None = None) -> models.Task:
        """The task; with at most `history_length` messages of its history (None: all)."""
        history = self.history()
        if history_length is not None:
            history = history[-history_length:] if history_length else []
        return models.Task(
            id=self.task_id,
            context_id=self.context_id,
            status=self.status(),
            artifacts=[self.artifact(self.text)] if artifacts and self.text else None,
            history=history or None,
        )

    def history(self) -> list[models.Message]:
        """Each question that is over, as its status showed it, and the answer it got."""
        messages = []
        for asked in self.asked:
            messages.append(self.question(asked["request"]))
            if asked["status"] == "answered":
                messages.append(self.answer(asked["request"], asked["decision"]))
        return messages

    @property
    def updated(self) -> str:
        return timestamp(self.since)

    def status(self) -> models.TaskStatus:
        return models.TaskStatus(state=self.state, message=self.message, timestamp=self.updated)

    def artifact(self, text: str) -> models.Artifact:
        return models.Artifact(artifact_id=REPLY, name=REPLY, parts=[models.Part(text=text)])

    def agent_message(
        self, suffix: str, parts: list[models.Part], metadata: dict[str, Any] | None = None
    ) -> models.Message:
        return models.Message(
            message_id=f"{self.task_id}.{suffix}",
            context_id=self.context_id,
            task_id=self.task_id,
            parts=parts,
            metadata=metadata,
        )

    def ask(self, request: dict[str, Any]) -> None:
        """The task waits for a person: the public request is its status message."""
        self.state = "TASK_STATE_INPUT_REQUIRED"
        self.interrupt = request
        self.message = self.question(request)

    def question(self, request: dict[str, Any]) -> models.Message:
        """The agent message that asks a person: the prompt as text, the rest of the
        public request as data."""
        asked = {k: v for k, v in request.items() if k != "prompt" and v is not None}
        return self.agent_message(
            str(request["interruptId"]),
            [
                models.Part(text=request["prompt"]),
                models.Part(data=asked, media_type="application/json"),
            ],
        )

    def answer(self, request: dict[str, Any], decision: Any) -> models.Message:
        """The person's answer to `request`, as a message that gives it (`methods.answer`
        reads a data part's value, else the text)."""
        if isinstance(decision, str):
            part = models.Part(text=decision)
        else:
            part = models.Part(data=decision, media_type="application/json")
        return models.Message(
            message_id=f"{self.task_id}.{request['interruptId']}.answer",
            context_id=self.context_id,
            task_id=self.task_id,
            role="ROLE_USER",
            parts=[part],
        )

    # --- frames in, events out ---------------------------------------------------------

    def apply(self, frame: dict[str, Any]) -> list[dict[str, Any]]:
        """Take one frame in; the stream events (`StreamResponse` JSON) it makes. Before
        a `done`, `since` should be the run's end (`lookup.stamp`)."""
        kind = frame["type"]
        if kind == "run_start":
            self.context_id = self.context_id or frame["contextId"]
            self.task_id = self.task_id or task_id_of(frame["contextId"], frame["turnId"])
            self.run_id, self.reply_turn = frame["runId"], frame["turnId"]
        elif kind == "token":
            append = bool(self.text)
            self.text += frame["delta"]
            return [self.artifact_update(frame["delta"], append=append, last=False)]
        elif kind == "thinking":
            part = models.Part(text=frame["delta"])
            metadata = {"thinwire": {"kind": "thinking"}}
            said = self.agent_message(f"s{frame['seq']}", [part], metadata)
            return [self.status_update(said)]
        elif kind == "tool_call":
            return [self.status_update(metadata={"thinwire": {"tool": frame["name"]}})]
        elif kind == "interrupt":
            self.interrupt = frame["interrupt"]
        elif kind == "error":
            self.failure = frame
        elif kind == "done":
            self.ended = True
            return self.end(frame["stopReason"])
        return []

    def end(self, stop_reason: str) -> list[dict[str, Any]]:
        if stop_reason == "interrupted" and self.interrupt is not None:
            self.ask(self.interrupt)  # the reply goes on once it is answered
            return [self.status_update(self.message)]
        events = [self.artifact_update(self.text, append=False, last=True)] if self.text else []
        self.state = ENDED_AS[stop_reason]
        if stop_reason == "interrupted":
            self.failure = CUT_SHORT
        if self.failure is not None:
            self.fail(self.failure)
        events.append(self.status_update(self.message))
        return events

    def fail(self, failure: dict[str, Any]) -> None:
        """The task failed: the error's public text is its status message, its code and
        `retryable` the message's metadata."""
        detail = {"code": failure["code"], "retryable": failure["retryable"]}
        part = models.Part(text=failure["message"])
        self.message = self.agent_message("failure", [part], {"thinwire": detail})

    def status_update(
        self, message: models.Message | None = None, metadata: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        status = models.TaskStatus(state=self.state, message=message, timestamp=self.updated)
        event = models.TaskStatusUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, status=status, metadata=metadata
        )
        return {"statusUpdate": event.json_body()}

    def artifact_update(self, text: str, *, append: bool, last: bool) -> dict[str, Any]:
        event = models.TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=self.artifact(text),
            append=append,
            last_chunk=last,
        )
        return {"artifactUpdate": event.json_body()}

    def fold(self, frames: Sequence[tuple[int, str]]) -> None:
        """Take frames in, for a snapshot: their events are not sent."""
        for _, data in frames:
            self.apply(json.loads(data))
