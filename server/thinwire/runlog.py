"""The run log: every frame of one run, in order, and the sources transports read from.

A run executes in its own task (`runner.py`) and appends to its log; any number of
readers follow the log while the run lives in this process. Every way of reading frames
— a live log, a finished run's stored frames, a run on another replica — is a
`FrameSource`, so the SSE and WebSocket transports read them all the same way.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json

from thinwire import wire
from thinwire.errors import RunTooLong
from thinwire.records import SEQ_LEASE
from thinwire.stores import Event, Store

if TYPE_CHECKING:
    from thinwire.contexts import Context

__all__ = [
    "BATCH_CHARS",
    "Batch",
    "Follower",
    "FrameSource",
    "Retagged",
    "RunLog",
    "StoredFrames",
    "encode_frame",
    "shown",
]

#: Frames kept back at the end of a seq lease for the run's `error` and `done`.
CLOSING_FRAMES = 3
#: A batch of frames stops growing past this many characters of JSON.
BATCH_CHARS = 64 * 1024

#: Frames read together, as `(seq, json)`: a transport sends them in one write.
Batch = list[tuple[int, str]]


class FrameSource(Protocol):
    """Frames to send a client, a batch at a time, until the run's `done`; None is a
    heartbeat (the run is silent, the connection should say it is alive)."""

    def batches(self) -> AsyncIterator[Batch | None]: ...


def encode_frame(
    model: type[BaseModel], context_id: str, run_id: str, seq: int, **fields: Any
) -> str:
    frame = model(context_id=context_id, run_id=run_id, seq=seq, **fields)
    try:
        return frame.model_dump_json(by_alias=True)
    except PydanticSerializationError:
        # Text UTF-8 cannot carry (a lone surrogate from a model, say) is replaced, not
        # allowed to fail the run.
        return json.dumps(
            replace_unencodable(frame.model_dump(by_alias=True)),
            ensure_ascii=False,
            separators=(",", ":"),
        )


def replace_unencodable(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, list):
        return [replace_unencodable(item) for item in value]
    if isinstance(value, dict):
        return {key: replace_unencodable(item) for key, item in value.items()}
    return value


class RunLog:
    """Every frame of one run, in order, as encoded JSON; followers wait for more.

    Deltas are the hot path (a fast model sends thousands a second to every follower):
    a `token` or `thinking` frame is written straight from a prefix encoded once per run
    and the delta encoded by pydantic-core's serializer, the same bytes the model would
    give; other frames go through their pydantic model. Followers wait on a future of
    their own, woken by the next frame, and read whatever arrived meanwhile at once.
    """

    def __init__(
        self, context: Context, run_id: str, seq_lease: int, request_id: str | None = None
    ) -> None:
        self.context = context
        self.run_id = run_id
        self.seq_lease = seq_lease
        #: The client's id of the command that started the run, echoed in `run_start`.
        self.request_id = request_id
        self.seqs: list[int] = []
        self.frames: list[str] = []
        #: Frames from this index on are not in the store's event log yet.
        self.flushed = 0
        self.finished = False
        #: Set by a stop, so the cancellation is recorded as `stopped`, not `interrupted`.
        self.stop_requested = False
        self._waiters: list[asyncio.Future[bool]] = []
        self._flusher_waiter: asyncio.Future[bool] | None = None
        self._calls = 0
        #: `{"contextId":…,"runId":…,"seq":` — what every frame of this run starts with.
        self._prefix = (
            f'{{"contextId":{to_json(context.id).decode()},'
            f'"runId":{to_json(run_id).decode()},"seq":'
        )

    def new_call_id(self) -> str:
        self._calls += 1
        return f"call-{self._calls}"

    def reserve_seq(self) -> int:
        self.context.record.last_seq += 1
        return self.context.record.last_seq

    def encode(self, model: type[BaseModel], seq: int, **fields: Any) -> Event:
        data = encode_frame(model, self.context.id, self.run_id, seq, **fields)
        return Event(seq=seq, run_id=self.run_id, data=data, time=time.time())

    def publish(self, event: Event, *, stored: bool = False, last: bool = False) -> None:
        """Hand a frame to the followers (and, unless `stored`, to the next flush)."""
        self.seqs.append(event.seq)
        self.frames.append(event.data)
        if stored and self.flushed == len(self.frames) - 1:
            self.flushed += 1
        self.finished = last
        self._wake(True)

    @property
    def unflushed(self) -> list[Event]:
        """The frames not yet in the store's event log, oldest first, as events."""
        now = time.time()
        run_id = self.run_id
        start = self.flushed
        return [
            Event(seq, run_id, data, now)
            for seq, data in zip(self.seqs[start:], self.frames[start:], strict=True)
        ]

    def _wake(self, value: bool) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(value)

    async def wait(self, timeout: float | None) -> bool:
        """Until the next frame (True) or `timeout` seconds of silence (False)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _settle, waiter, False)
        try:
            return await waiter
        finally:
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    async def flusher_pause(self, timeout: float | None) -> None:
        """For the run's flusher: `timeout` seconds, or until the next frame when None;
        cut short by `stop_flushing`. One future and one timer: no task per tick."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._flusher_waiter = waiter
        if timeout is None:
            self._waiters.append(waiter)  # the next frame resolves it
            timer = None
        else:
            timer = loop.call_later(timeout, _settle, waiter, True)
        try:
            await waiter
        finally:
            self._flusher_waiter = None
            if timer is not None:
                timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def stop_flushing(self) -> None:
        """Wake the run's flusher now (its run is over)."""
        if self._flusher_waiter is not None:
            _settle(self._flusher_waiter, False)

    def _append(self, model: type[BaseModel], **fields: Any) -> None:
        closing = model in (wire.ErrorFrame, wire.DoneFrame)
        if not closing and self.context.record.last_seq >= self.seq_lease - CLOSING_FRAMES:
            raise RunTooLong(f"a run may send at most {SEQ_LEASE - CLOSING_FRAMES} frames")
        self.publish(self.encode(model, self.reserve_seq(), **fields))

    def run_start(self, agent: str, turn_id: str | None, user_turn_id: str | None) -> None:
        self._append(
            wire.RunStartFrame,
            agent=agent,
            request_id=self.request_id,
            turn_id=turn_id,
            user_turn_id=user_turn_id,
        )

    def title(self, title: str) -> None:
        self._append(wire.TitleFrame, title=title)

    def thinking(self, delta: str) -> None:
        self._delta(wire.ThinkingFrame, '"type":"thinking","delta":', delta)

    def token(self, delta: str) -> None:
        self._delta(wire.TokenFrame, '"type":"token","delta":', delta)

    def _delta(self, model: type[BaseModel], middle: str, delta: str) -> None:
        """`_append` for a delta frame, without building the model: same bytes, a
        fraction of the time. Anything unusual takes the model's path."""
        record = self.context.record
        if type(delta) is not str or record.last_seq >= self.seq_lease - CLOSING_FRAMES:
            self._append(model, delta=delta)
            return
        try:
            encoded = to_json(delta).decode()
        except PydanticSerializationError:  # e.g. a lone surrogate: as the model does
            self._append(model, delta=delta)
            return
        record.last_seq += 1
        seq = record.last_seq
        self.seqs.append(seq)
        self.frames.append(f"{self._prefix}{seq},{middle}{encoded}}}")
        if self._waiters:
            self._wake(True)

    def tool_call(self, call_id: str, name: str) -> None:
        self._append(wire.ToolCallFrame, call_id=call_id, name=name)

    def tool_result(self, call_id: str, name: str, *, ok: bool) -> None:
        self._append(wire.ToolResultFrame, call_id=call_id, name=name, ok=ok)

    def interrupt(self, request: wire.InterruptRequest) -> None:
        self._append(wire.InterruptFrame, interrupt=request)

    def error(self, code: str, message: str, *, retryable: bool) -> None:
        self._append(wire.ErrorFrame, code=code, message=message, retryable=retryable)

    async def flush(self, store: Store) -> None:
        """Append the unflushed frames to the event log. They leave `unflushed` only once
        stored, so a flush cut short is simply repeated (appends are idempotent)."""
        start, batch = self.flushed, self.unflushed
        if batch:
            await store.append_events(self.context.id, batch)
            self.flushed = max(self.flushed, start + len(batch))

    def follow(self, after: int = 0, heartbeat: float | None = None) -> Follower:
        """`(seq, json)` for every frame with seq > `after` until the run is done; None
        when `heartbeat` seconds pass without a frame."""
        return Follower(self, after, heartbeat)


def _settle(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)


class Follower:
    """One reader of a live run log (a FrameSource): each batch is whatever arrived since
    the last, so a response sends the frames of one tick in one write."""

    def __init__(self, log: RunLog, after: int, heartbeat: float | None) -> None:
        self.log = log
        self.heartbeat = heartbeat
        self.index = bisect.bisect_right(log.seqs, after)

    async def batches(self) -> AsyncIterator[Batch | None]:
        log = self.log
        frames = log.frames
        while True:
            start = end = self.index
            size = 0
            # Bounded, so a reader that stops reading holds up one batch, not the run.
            while end < len(frames) and size < BATCH_CHARS:
                size += len(frames[end])
                end += 1
            if start < end:
                self.index = end
                yield list(zip(log.seqs[start:end], frames[start:end], strict=True))
                continue
            if log.finished:
                return
            if not await log.wait(self.heartbeat):
                yield None


def shown(frames: Sequence[str]) -> tuple[str, list[str]]:
    """The reply text and the tool names a run's frames showed, in order: what the
    client saw of a run that never got to save its end."""
    text: list[str] = []
    tools: list[str] = []
    for data in frames:
        frame = json.loads(data)
        if frame.get("type") == "token":
            text.append(frame["delta"])
        elif frame.get("type") == "tool_call":
            tools.append(frame["name"])
    return "".join(text), tools


class Retagged:
    """A source whose `run_start` names another request: a repeated send gets the first
    try's run, announced as the answer to the repeat (a FrameSource)."""

    def __init__(self, frames: FrameSource, request_id: str | None) -> None:
        self.frames = frames
        self.request_id = request_id

    async def batches(self) -> AsyncIterator[Batch | None]:
        retag = True
        async for batch in self.frames.batches():
            if retag and batch:
                retag = False
                seq, data = batch[0]
                frame = json.loads(data)
                if frame.get("type") == "run_start":
                    frame["requestId"] = self.request_id
                    data = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
                batch = [(seq, data), *batch[1:]]
            yield batch


class StoredFrames:
    """Frames read from the store's event log: a finished run's (a FrameSource)."""

    def __init__(self, frames: Sequence[tuple[int, str]]) -> None:
        self.frames = frames

    async def batches(self) -> AsyncIterator[Batch | None]:
        batch: Batch = []
        size = 0
        for frame in self.frames:
            batch.append(frame)
            size += len(frame[1])
            if size >= BATCH_CHARS:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch
