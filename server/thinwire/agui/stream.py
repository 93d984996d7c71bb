"""The AG-UI event stream: a run's frames as events, for thinwire's own SSE response.

The response is thinwire's `EventStream` (its disconnect listener, write timeout and
heartbeats, which the client's SSE parser skips as comments) reading a source that
translates each batch of frames into events. An event's SSE `id:` is the seq of the
frame it came from (0 for the events of the thread itself, which no frame made); the
client does not read it. The client picks its parser by the content type: anything but
AG-UI's protobuf type is read as SSE.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from thinwire.agui.events import Event, Events
from thinwire.jsontext import dumps
from thinwire.runlog import Batch, FrameSource

__all__ = ["EventSource"]


class EventSource:
    """`first` (events about the thread, made by the caller), then the frames of
    `frames`, if any, as the events of one run (a FrameSource of events)."""

    def __init__(
        self, events: Events, frames: FrameSource | None, first: list[Event] | None = None
    ) -> None:
        self.events = events
        self.frames = frames
        self.first = first or []

    async def batches(self) -> AsyncIterator[Batch | None]:
        if self.first:
            yield [(0, dumps(event)) for event in self.first]
        if self.frames is None:
            return
        encode = self.events.encode
        async for batch in self.frames.batches():
            if batch is None:
                yield None  # a heartbeat
                continue
            out = [(seq, event) for seq, data in batch for event in encode(json.loads(data))]
            if out:
                yield out
