"""A run's frames as A2A stream events, and as the task they add up to.

A stream begins with the task as it stands after the frames at hand that a task shows
whole (its ids, the reply so far), up to the first one it cannot show (a thinking, a
tool call, the run's end); then it sends an event for every frame from there on, in
order. So every frame reaches the stream once: a client that subscribes again after a
dropped stream gets the reply so far in that first task, then the rest, and a thinking
or a tool call the run made before the stream attached is an event, not lost in the
task. Events go out through thinwire's own SSE response (`sse.EventStream`): heartbeats,
the slow-reader timeout, a run untouched by a disconnect. The SSE `id:` of an event is
the seq of the frame it came from (of the task: the last frame it shows), so the events
of one frame share it; nothing here reads `Last-Event-ID` (`SubscribeToTask` resumes).

A status says when it was set, as the record says (`lookup.stamp`): the run's start
while it works, whether the stream saw it start or not, and its end, read once the
`done` frame comes (the record has it by then), so a replayed end says what a live one
said and what `GetTask` says after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from thinwire.a2a.lookup import Caller, stamp
from thinwire.a2a.tasks import TaskView
from thinwire.jsontext import dumps
from thinwire.runlog import Batch, FrameSource

__all__ = ["TaskEvents", "envelope", "first_frames", "until_done"]


def envelope(rpc_id: str | int | None, result: dict[str, Any]) -> str:
    """A JSON-RPC response, as one line of JSON."""
    return dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})


#: The frames a task shows whole (`run_start` its ids, `token` its reply) or not at all:
#: the ones the stream's first task may take in rather than send as events.
SHOWN_IN_TASK = frozenset({"run_start", "token", "title", "tool_result"})


class TaskEvents:
    """The A2A stream of a task whose run sends `frames` (a FrameSource)."""

    def __init__(
        self,
        frames: FrameSource,
        view: TaskView,
        caller: Caller,
        history_length: int | None = None,
    ) -> None:
        self.frames = frames
        self.view = view
        self.caller = caller
        self.rpc_id = caller.rpc_id
        #: How much of its history the task that opens the stream shows (None: all).
        self.history_length = history_length

    async def batches(self) -> AsyncIterator[Batch | None]:
        started = False
        async for batch in self.frames.batches():
            if batch is None:
                yield None  # a heartbeat
            elif not started:
                started = True
                yield await self.opening(batch)
            elif events := await self.events(batch):
                yield events

    async def opening(self, batch: Batch) -> Batch:
        """The task as the frames at hand show it, then the events of the frames it does
        not show (and of every frame after the first of those)."""
        shown = 0
        while shown < len(batch) and json.loads(batch[shown][1])["type"] in SHOWN_IN_TASK:
            shown += 1
        self.view.fold(batch[:shown])
        await stamp(self.caller, self.view)  # when the run started, if not known yet
        seq = batch[shown - 1][0] if shown else batch[0][0] - 1  # nothing: the seq before
        task = self.view.task(history_length=self.history_length).json_body()
        return [(seq, envelope(self.rpc_id, {"task": task})), *await self.events(batch[shown:])]

    async def events(self, batch: Batch) -> Batch:
        sent = []
        for seq, data in batch:
            frame = json.loads(data)
            if frame["type"] == "done":  # the record has the run's end before it is sent
                await stamp(self.caller, self.view, ending=True)
            sent += [(seq, envelope(self.rpc_id, event)) for event in self.view.apply(frame)]
        return sent


@contextlib.asynccontextmanager
async def reading(frames: FrameSource) -> AsyncIterator[AsyncIterator[Batch | None]]:
    """The source's batches, closed when the block ends, read to the end or not: a
    source may hold a subscription."""
    batches = frames.batches()
    try:
        yield batches
    finally:
        if isinstance(batches, AsyncGenerator):
            await batches.aclose()


async def first_frames(frames: FrameSource) -> Batch:
    """The frames at hand (the first batch; for a run that has sent nothing yet, its
    first frames)."""
    async with reading(frames) as batches:
        async for batch in batches:
            if batch:
                return batch
    return []


async def until_done(view: TaskView, frames: FrameSource, timeout: float | None) -> None:
    """Fold every frame into `view` until the run's `done`, or for `timeout` seconds."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout), reading(frames) as batches:
            async for batch in batches:
                if batch:
                    view.fold(batch)
