"""The run log: every frame of one run, in order, and the sources transports read from.

A run executes in its own task (`runner.py`) and appends to its log; any number of
readers follow the log while the run lives in this process. Every way of reading frames
— a live log, a finished run's stored frames, a run on another replica — is a
`FrameSource`, so the SSE and WebSocket transports read them all the same way.

A transport reading a live log pumps it (`Follower.pump`) rather than pulling batches:
the hot path of a model that hands over a token per event-loop tick or slower. The
reader's outlet registers with the log, and a frame appended while it is idle (nothing
being sent) is sent at once, from the task that appended it; frames appended a moment
after a send (a burst said in one go) wait for the loop's next tick, when one callback
(`Dispatch`) sends every waiting outlet's frames, each outlet's in one write. So a token
costs no future, no task wake-up and no timer. Only a send that does not complete at
once (the client's buffer is full, a middleware awaits) is finished by the reader's own
task, which also catches up on a backlog; the next frames wait for it. The dispatch runs
one timer per event loop for every outlet: a heartbeat after `heartbeat` seconds of
silence, and a send in flight for longer than `timeout` (a reader that stopped reading)
is cut short with TimeoutError in the reader's task, as `asyncio.timeout` would.

A send started outside the reader's task runs as that task and in a copy of its context
(`asyncio.tasks._enter_task`, as eager tasks do): code on the send path that asks for
the current task (an `asyncio.timeout`, an anyio cancel scope in a middleware) sees the
reader's, and a send that suspends is resumed by that very task. Whatever a send raises
ends the reader's pump, never the run that appended the frame.
"""

from __future__ import annotations

import asyncio
import bisect
import contextvars
import json
import math
import time
import weakref
from array import array
from asyncio import tasks as asyncio_tasks
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json

from thinwire import wire
from thinwire.errors import RunTooLong
from thinwire.jsontext import replace_unencodable
from thinwire.records import SEQ_LEASE
from thinwire.stores import Event, RunEvents, Store

if TYPE_CHECKING:
    from thinwire.contexts import Context

__all__ = [
    "BATCH_CHARS",
    "Batch",
    "Dispatch",
    "Follower",
    "FrameSource",
    "Outlet",
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
#: A frame appended this soon after its reader's last send began waits for the next
#: tick: a burst said in one go then leaves in one write (a model's tokens come further
#: apart than a write takes).
COALESCE_S = 30e-6

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


class RunLog:
    """Every frame of one run, in order, as encoded JSON; followers wait for more.

    Deltas are the hot path (a fast model sends thousands a second to every follower):
    a `token` or `thinking` frame is written straight from a prefix encoded once per run
    and the delta encoded by pydantic-core's serializer, the same bytes the model would
    give; other frames go through their pydantic model. Followers wait on a future of
    their own, woken by the next frame, and read whatever arrived meanwhile at once.
    """

    def __init__(
        self,
        context: Context,
        run_id: str,
        seq_lease: int,
        request_id: str | None = None,
        *,
        switched: bool = False,
    ) -> None:
        self.context = context
        self.run_id = run_id
        self.seq_lease = seq_lease
        #: The client's id of the command that started the run, echoed in `run_start`.
        self.request_id = request_id
        #: The run made another branch the one shown first (`run_start`'s `branchSwitched`).
        self.switched = switched
        #: Seqs in an array, not a list: nothing for the garbage collector to visit.
        self.seqs: array[int] = array("q")
        self.frames: list[str] = []
        #: Frames from this index on are not in the store's event log yet.
        self.flushed = 0
        self.finished = False
        #: Set by a stop, so the cancellation is recorded as `stopped`, not `interrupted`.
        self.stop_requested = False
        self._waiters: list[asyncio.Future[bool]] = []
        #: The outlets pumping this log to readers (see `Outlet`).
        self.outlets: list[Outlet] = []
        self._flusher_waiter: asyncio.Future[bool] | None = None
        self._calls = 0
        #: The first question the run sent (its first `interrupt` frame), if it asked.
        self.asked: wire.InterruptRequest | None = None
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
        for outlet in self.outlets:
            outlet.notify()

    @property
    def unflushed(self) -> RunEvents:
        """The frames not yet in the store's event log, oldest first, as events."""
        return self.unflushed_and()

    def unflushed_and(self, *closing: Event) -> RunEvents:
        """The unflushed frames, then `closing` (frames saved with them, not published
        yet)."""
        start = self.flushed
        seqs, frames = self.seqs[start:], self.frames[start:]
        for event in closing:
            seqs.append(event.seq)
            frames.append(event.data)
        return RunEvents(seqs, frames, self.run_id, time.time())

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

    async def flusher_pause(self, timeout: float) -> None:
        """For the run's own flusher: `timeout` seconds, cut short by `stop_flushing`.
        One future and one timer: no task per tick."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._flusher_waiter = waiter
        timer = loop.call_later(timeout, _settle, waiter, True)
        try:
            await waiter
        finally:
            self._flusher_waiter = None
            timer.cancel()

    def stop_flushing(self) -> None:
        """Wake the run's flusher now (its run is over)."""
        if self._flusher_waiter is not None:
            _settle(self._flusher_waiter, False)

    def _append(self, model: type[BaseModel], **fields: Any) -> None:
        closing = model in (wire.ErrorFrame, wire.DoneFrame)
        if not closing and self.context.record.last_seq >= self.seq_lease - CLOSING_FRAMES:
            raise RunTooLong(f"a run may send at most {SEQ_LEASE - CLOSING_FRAMES} frames")
        self.publish(self.encode(model, self.reserve_seq(), **fields))

    def run_start(
        self, agent: str, turn_id: str | None, user_turn_id: str | None, after: str | None
    ) -> None:
        self._append(
            wire.RunStartFrame,
            agent=agent,
            request_id=self.request_id,
            turn_id=turn_id,
            user_turn_id=user_turn_id,
            after_turn_id=after,
            branch_switched=self.switched,
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
        for outlet in self.outlets:
            outlet.notify()

    def tool_call(self, call_id: str, name: str) -> None:
        self._append(wire.ToolCallFrame, call_id=call_id, name=name)

    def tool_result(self, call_id: str, name: str, *, ok: bool) -> None:
        self._append(wire.ToolResultFrame, call_id=call_id, name=name, ok=ok)

    def interrupt(self, request: wire.InterruptRequest) -> None:
        self._append(wire.InterruptFrame, interrupt=request)
        if self.asked is None:
            self.asked = request

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
    the last, so a response sends the frames of one tick in one write. A transport that
    writes them itself pumps it (`pump`) instead of reading `batches`."""

    def __init__(self, log: RunLog, after: int, heartbeat: float | None) -> None:
        self.log = log
        self.heartbeat = heartbeat
        self.index = bisect.bisect_right(log.seqs, after)

    def take(self) -> Batch:
        """The frames not read yet ([] if none), at most about BATCH_CHARS of them: a
        reader that stops reading holds up one batch, not the run."""
        log = self.log
        frames = log.frames
        start = self.index
        count = len(frames)
        if start >= count:
            return []
        end = start + 1
        if end == count:  # one frame: a model's token per tick, the common case
            self.index = end
            return [(log.seqs[start], frames[start])]
        size = len(frames[start])
        while end < count and size < BATCH_CHARS:
            size += len(frames[end])
            end += 1
        self.index = end
        return list(zip(log.seqs[start:end], frames[start:end], strict=True))

    @property
    def done(self) -> bool:
        """The run is over and every frame of it was read."""
        return self.log.finished and self.index >= len(self.log.frames)

    async def batches(self) -> AsyncIterator[Batch | None]:
        log = self.log
        while True:
            batch = self.take()
            if batch:
                yield batch
                continue
            if log.finished:
                return
            if not await log.wait(self.heartbeat):
                yield None

    async def pump(self, send: Send, *, timeout: float) -> None:
        """Send every frame until the run is done, a batch at a time (`send(batch)`), and
        a heartbeat (`send(None)`) after `heartbeat` seconds of silence (if any).
        A send in flight for more than `timeout` seconds raises TimeoutError here."""
        await Outlet(self, send, timeout, self.heartbeat).run()


#: How an outlet sends a batch (None: a heartbeat): an awaitable, started at once, or
#: None when the batch was written already, in full (`direct.py`).
Send = Callable[[Batch | None], Awaitable[Any] | None]


class Outlet:
    """The writing end of one reader of a live log, for `Follower.pump` (see the module's
    docstring). `busy` while the reader's task has the sending in hand (it catches up,
    or finishes a send that did not complete at once): frames appended meanwhile are
    left to it. Idle, it sends a frame as it is appended, or queues itself for the next
    tick when it sent a moment ago."""

    def __init__(
        self, follower: Follower, send: Send, timeout: float, heartbeat: float | None
    ) -> None:
        self.follower = follower
        self.send = send
        self.timeout = timeout
        self.heartbeat = heartbeat
        self.loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None, "an outlet is pumped by a task"
        self.task = task
        self.context = contextvars.copy_context()
        self.dispatch = Dispatch.of(self.loop)
        self.busy = True
        self.queued = False
        #: When (time.monotonic) the send in flight started (0: none), the last send
        #: ended, and since when the reader heard nothing.
        self.sending_since = 0.0
        self.sent_at = -math.inf
        self.quiet_since = time.monotonic()
        #: A send that suspended, for the reader's task to finish; a send that failed.
        self.parked: Parked | None = None
        self.failure: BaseException | None = None
        self.stalled = False
        self._wake: asyncio.Future[None] | None = None

    def notify(self) -> None:
        """A frame was appended (in whatever task appended it): send it now, as the
        reader's task, unless the outlet sent a moment ago, in which case more frames
        are likely coming in the same go (a burst) and it waits for the next tick."""
        if self.busy or self.queued:
            return
        if time.monotonic() - self.sent_at < COALESCE_S:
            self.queued = True
            due = self.dispatch.due
            if not due:
                self.dispatch.loop.call_soon(self.dispatch.send_due)
            due.append(self)
            return
        self.send_available(asyncio.current_task(self.loop))

    def flush(self) -> None:
        """The dispatch's callback (in no task) for an outlet queued by `notify`."""
        self.queued = False
        if not self.busy:
            self.send_available(None)

    def send_available(self, current: asyncio.Task[Any] | None) -> None:
        """Send what there is, as the reader's task (`current` is the task this runs in,
        if any): at once where sends complete at once; what does not is left to the
        reader's task."""
        follower = self.follower
        log = follower.log
        while batch := follower.take():
            if not self.start(batch, swap=True, current=current):
                self.rouse()
                return
            if follower.index >= len(log.frames):
                break
        if log.finished:
            self.rouse()

    def beat(self, now: float) -> None:
        """A heartbeat (the dispatch's timer, in no task), if the outlet is idle and has
        been silent long enough."""
        heartbeat = self.heartbeat
        if heartbeat is None or self.busy or now - self.quiet_since < heartbeat:
            return
        if not self.start(None, swap=True):
            self.rouse()

    def start(
        self, batch: Batch | None, *, swap: bool, current: asyncio.Task[Any] | None = None
    ) -> bool:
        """Send `batch` now (with `swap`: as the reader's task, leaving `current` for the
        while): True if the send completed; if not, the outlet is busy and the reader's
        task finishes the send (or raises its error)."""
        awaitable = self.send(batch)
        if awaitable is None:  # written already, in full
            self.quiet_since = self.sent_at = time.monotonic()
            return True
        steps = awaitable if type(awaitable) is CoroutineType else awaitable.__await__()
        self.sending_since = now = time.monotonic()
        loop, task = self.loop, self.task
        if swap:
            if current is not None:
                asyncio_tasks._leave_task(loop, current)
            asyncio_tasks._enter_task(loop, task)
        try:
            yielded = self.context.run(steps.send, None)
        except StopIteration:
            self.quiet_since = self.sent_at = now
            self.sending_since = 0.0
            return True
        except (Exception, asyncio.CancelledError) as exc:
            self.sending_since = 0.0
            self.failure = exc
            self.busy = True
            return False
        finally:
            if swap:
                asyncio_tasks._leave_task(loop, task)
                if current is not None:
                    asyncio_tasks._enter_task(loop, current)
        self.parked = Parked(steps, yielded, self.context)
        self.busy = True
        return False

    def rouse(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def stall(self) -> None:
        """The send in flight took longer than `timeout`: end it with TimeoutError."""
        if not self.stalled:
            self.stalled = True
            self.task.cancel()

    async def run(self) -> None:
        """The reader's task: catch up, finish what the callback could not, end when the
        run is done and every frame was sent."""
        log, follower = self.follower.log, self.follower
        log.outlets.append(self)
        self.dispatch.add(self)
        try:
            while True:
                if self.failure is not None:
                    failure, self.failure = self.failure, None
                    raise failure
                if self.parked is not None:
                    parked, self.parked = self.parked, None
                    await parked
                    self.quiet_since = self.sent_at = time.monotonic()
                    self.sending_since = 0.0
                    continue
                batch = follower.take()
                if batch:
                    self.start(batch, swap=False)
                    continue
                if follower.done:
                    return
                self._wake = self.loop.create_future()
                self.busy = False
                try:
                    await self._wake
                finally:
                    self._wake = None
                    self.busy = True
        except asyncio.CancelledError:
            if self.stalled and self.task.uncancel() == 0:
                raise TimeoutError("the reader took no frame in time") from None
            raise
        finally:
            log.outlets.remove(self)
            self.dispatch.discard(self)
            if self.parked is not None:  # the reader left before finishing the send
                self.parked.cancel()


class Parked:
    """An awaitable started by hand (`steps` is its `__await__()`) that suspended:
    awaiting this finishes it in the awaiting task, every step in `context`, as if it
    had been awaited from the start."""

    def __init__(
        self,
        steps: Generator[Any, Any, Any] | Coroutine[Any, Any, Any],
        yielded: Any,
        context: contextvars.Context,
    ) -> None:
        self.steps = steps
        self.yielded = yielded
        self.context = context

    def __await__(self) -> Generator[Any, Any, None]:
        coroutine, run = self.steps, self.context.run
        value = self.yielded
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # a cancellation, thrown in where it waits
                try:
                    value = run(coroutine.throw, exc)
                except StopIteration:
                    return
            else:
                try:
                    value = run(coroutine.send, sent)
                except StopIteration:
                    return

    def cancel(self) -> None:
        """End it as a cancelled await would: CancelledError where it waits."""
        try:
            self.context.run(self.steps.throw, asyncio.CancelledError())
        except (StopIteration, Exception, asyncio.CancelledError):
            return
        self.context.run(self.steps.close)  # it went on waiting: drop it


class Dispatch:
    """One per event loop: at the next tick, one callback sends the frames of every
    outlet a frame was appended to; one timer, every quarter of the shortest heartbeat
    or timeout of the outlets there are, sends heartbeats and ends stalled sends."""

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Dispatch:
        dispatch = _DISPATCHES.get(loop)
        if dispatch is None:
            dispatch = _DISPATCHES[loop] = cls(loop)
        return dispatch

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.due: list[Outlet] = []
        self.outlets: set[Outlet] = set()
        self._timer: asyncio.TimerHandle | None = None

    def send_due(self) -> None:
        due, self.due = self.due, []
        for outlet in due:
            try:
                outlet.flush()
            except Exception as exc:  # a bug: fail that reader, not the others
                outlet.failure = exc
                outlet.busy = True
                outlet.rouse()

    def add(self, outlet: Outlet) -> None:
        self.outlets.add(outlet)
        when = self.loop.time() + self._period(outlet)
        if self._timer is None or when < self._timer.when():
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_at(when, self.tick)

    def discard(self, outlet: Outlet) -> None:
        self.outlets.discard(outlet)

    @staticmethod
    def _period(outlet: Outlet) -> float:
        shortest = outlet.timeout
        if outlet.heartbeat is not None:
            shortest = min(shortest, outlet.heartbeat)
        return max(0.005, shortest / 4)

    def tick(self) -> None:
        self._timer = None
        if not self.outlets:
            return
        now = time.monotonic()
        period = 3600.0
        for outlet in list(self.outlets):
            period = min(period, self._period(outlet))
            if outlet.sending_since:
                if now - outlet.sending_since > outlet.timeout:
                    outlet.stall()
            else:
                outlet.beat(now)
        self._timer = self.loop.call_later(period, self.tick)


_DISPATCHES: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Dispatch] = (
    weakref.WeakKeyDictionary()
)


def shown(frames: Sequence[str]) -> tuple[str, list[dict[str, Any]], str]:
    """What a run's frames showed the client of a run that never got to save its end:
    the reply text, the tool calls in call order, each with how it ended as far as
    they say (`ok`: true, false, or null when no result was shown), and the thinking."""
    text: list[str] = []
    thinking: list[str] = []
    calls: dict[str, dict[str, Any]] = {}
    for data in frames:
        frame = json.loads(data)
        kind = frame.get("type")
        if kind == "token":
            text.append(frame["delta"])
        elif kind == "thinking":
            thinking.append(frame["delta"])
        elif kind == "tool_call":
            calls[frame["callId"]] = {"callId": frame["callId"], "name": frame["name"], "ok": None}
        elif kind == "tool_result" and frame["callId"] in calls:
            calls[frame["callId"]]["ok"] = frame["ok"]
    return "".join(text), list(calls.values()), "".join(thinking)


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
