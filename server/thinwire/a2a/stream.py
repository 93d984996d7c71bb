"""A run's frames as A2A stream events, and as the task they add up to.

A stream begins with the task as it stands after the frames at hand (whatever the run
has sent so far), then sends an event for each later frame: a client that subscribes
again after a dropped stream gets the reply so far in that first task, then the rest,
nothing lost and nothing twice. Events go out through thinwire's own SSE response
(`sse.EventStream`): heartbeats, the slow-reader timeout, a run untouched by a
disconnect. The SSE `id:` of an event is the seq of the frame it came from.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from thinwire.a2a.tasks import TaskView
from thinwire.jsontext import dumps
from thinwire.runlog import Batch, FrameSource

__all__ = ["TaskEvents", "envelope", "first_frames", "until_done"]


def envelope(rpc_id: str | int | None, result: dict[str, Any]) -> str:
    """A JSON-RPC response, as one line of JSON."""
    return dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})


class TaskEvents:
    """The A2A stream of a task whose run sends `frames` (a FrameSource)."""

    def __init__(self, frames: FrameSource, view: TaskView, rpc_id: str | int | None) -> None:
        self.frames = frames
        self.view = view
        self.rpc_id = rpc_id

    async def batches(self) -> AsyncIterator[Batch | None]:
        view, rpc_id = self.view, self.rpc_id
        started = False
        async for batch in self.frames.batches():
            if batch is None:
                yield None  # a heartbeat
            elif not started:
                started = True
                view.fold(batch)
                yield [(batch[-1][0], envelope(rpc_id, {"task": view.task().json_body()}))]
            elif events := [
                (seq, envelope(rpc_id, event))
                for seq, data in batch
                for event in view.apply(json.loads(data))
            ]:
                yield events


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
