"""Running an agent: the run log (the frames of one run) and the task that fills it.

The run executes in its own task, not in the HTTP response: a client that disconnects
does not stop the run, and any number of readers can follow the same log, from memory
while the run lives in this process and from the store's event log after.

Persistence happens at the two edges of a run, with the frames flushed in between.
`begin_run` saves the user's message and marks the run active before the first frame is
sent. While the run goes, its frames are appended to the store's event log in batches.
`finish` saves the reply, the tool records, the AgentState writes (with their audit) and
the last frames including `done` in one atomic save, and only then sends `done`. A
process killed in between leaves the marked run, which the registry records as
interrupted (with a `done` frame of its own) on next load: completed turns intact,
nothing half-written.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json

from thinwire import wire
from thinwire.agent import Run
from thinwire.contexts import SEQ_LEASE, Context, ContextRegistry, public_turn
from thinwire.ids import new_run_id
from thinwire.interrupts import ReplayMismatch, Suspend
from thinwire.stores import Event

__all__ = ["Follower", "RunLog", "RunTooLong", "begin_run", "execute", "stored_frames"]

logger = logging.getLogger("thinwire.runs")

#: Frames kept back at the end of a seq lease for the run's `error` and `done`.
CLOSING_FRAMES = 3
#: Seconds between flushes of a running run's frames to the store's event log.
FLUSH_INTERVAL = 0.05
#: How many answered interrupt ids a context remembers.
ANSWERED_KEPT = 100
#: A follower's batch of frames stops growing past this many characters of JSON.
BATCH_CHARS = 64 * 1024


class RunTooLong(RuntimeError):
    """A run emitted more frames than one seq lease allows."""


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

    def __init__(self, context: Context, run_id: str, seq_lease: int) -> None:
        self.context = context
        self.run_id = run_id
        self.seq_lease = seq_lease
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

    def run_start(self, agent: str) -> None:
        self._append(wire.RunStartFrame, agent=agent)

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

    async def flush(self, registry: ContextRegistry) -> None:
        """Append the unflushed frames to the event log. They leave `unflushed` only once
        stored, so a flush cut short is simply repeated (appends are idempotent)."""
        start, batch = self.flushed, self.unflushed
        if batch:
            await registry.store.append_events(self.context.id, batch)
            self.flushed = max(self.flushed, start + len(batch))

    def follow(self, after: int = 0, heartbeat: float | None = None) -> Follower:
        """`(seq, json)` for every frame with seq > `after` until the run is done; None
        when `heartbeat` seconds pass without a frame."""
        return Follower(self, after, heartbeat)


def _settle(waiter: asyncio.Future[bool], value: bool) -> None:
    if not waiter.done():
        waiter.set_result(value)


class Follower:
    """One reader of a run log: an async iterator of `(seq, json)`, None for a heartbeat.

    `batches()` reads the same frames as lists of whatever has arrived, so a response can
    send the frames of one tick in one write.
    """

    def __init__(self, log: RunLog, after: int, heartbeat: float | None) -> None:
        self.log = log
        self.heartbeat = heartbeat
        self.index = bisect.bisect_right(log.seqs, after)

    def __aiter__(self) -> Follower:
        return self

    async def __anext__(self) -> tuple[int, str] | None:
        log = self.log
        while True:
            index = self.index
            if index < len(log.frames):
                self.index = index + 1
                return log.seqs[index], log.frames[index]
            if log.finished:
                raise StopAsyncIteration
            if not await log.wait(self.heartbeat):
                return None

    async def batches(self) -> AsyncIterator[list[tuple[int, str]] | None]:
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


async def stored_frames(
    registry: ContextRegistry, context: Context, after: int
) -> list[tuple[int, str]]:
    """The latest finished run's frames after `after`, from the store's event log."""
    last_run = context.record.last_run
    if last_run is None:
        return []
    events = await registry.store.read_events(context.id, max(after, last_run["firstSeq"] - 1))
    return [(e.seq, e.data) for e in events if e.run_id == last_run["runId"]]


async def begin_run(
    registry: ContextRegistry,
    context: Context,
    text: str | None,
    *,
    run_id: str | None = None,
    answering: str | None = None,
) -> RunLog:
    """Hold the context and durably record the run's start: the user's `text`, or the
    answer to the pending interrupt `answering`. `context_busy` if the context is held,
    `decision_pending` if it waits for an answer and this is not one."""
    run_id = run_id or new_run_id()
    await registry.acquire(context, "decision" if answering else "run")
    try:
        record = context.record
        previous = record.last_run
        lease = record.last_seq + SEQ_LEASE
        if answering is not None:
            record.suspended = None
            record.answered = [*record.answered, answering][-ANSWERED_KEPT:]
        if text is not None:
            record.add_message({"role": "user", "content": text})
            record.add_turn(public_turn("user", text))
        record.active_run = {"runId": run_id, "seqLease": lease}
        record.last_run = {"runId": run_id, "firstSeq": record.last_seq + 1}
        # Keep the frames of this run and the one before it; older ones are done with.
        trim_before = previous["firstSeq"] if previous else None
        await registry.save(context, trim_before=trim_before, compact=False)  # the run goes on
    except BaseException:
        await registry.release(context)
        raise
    log = context.run = RunLog(context, run_id, lease)
    return log


def failure(log: RunLog, code: str, what: str) -> None:
    """Log the exception under a reference and send the client only the reference."""
    reference = "err-" + secrets.token_hex(6)
    logger.exception("%s in %s (%s)", what, log.context.id, reference)
    log.error(code, f"{what}. Reference: {reference}.", retryable=code == "store_error")


async def flush_periodically(
    registry: ContextRegistry, log: RunLog, task: asyncio.Task[Any] | None, over: asyncio.Event
) -> None:
    """While the run goes: flush its frames, keep its lease, and heed a stop asked for on
    another replica. Ends when `over` is set, not by cancellation, which a store client
    may swallow mid-command. With a store of one process there is only the flush, so
    the flusher sleeps until a frame comes: a run that sends nothing (one waiting for a
    person, say) costs no wake-ups."""
    ticks = 0
    renew_every = max(1, int(registry.lease_ttl / 3 / FLUSH_INTERVAL))
    while not over.is_set():
        if not registry.store.shared and log.flushed >= len(log.frames):
            await log.flusher_pause(None)
            if over.is_set():
                return
        await log.flusher_pause(FLUSH_INTERVAL)
        if over.is_set():
            return
        ticks += 1
        try:
            await log.flush(registry)
            if registry.store.shared:
                if ticks % renew_every == 0 and not await registry.renew(log.context):
                    logger.warning("lost the lease of %s mid-run", log.context.id)
                if task is not None and await registry.store.stop_requested(log.run_id):
                    log.stop_requested = True
                    task.cancel()
                    return
        except Exception:
            # The frames stay unflushed and go with the run's final save.
            logger.warning("flushing frames of %s failed", log.context.id, exc_info=True)


async def execute(
    registry: ContextRegistry,
    context: Context,
    log: RunLog,
    text: str,
    journal: list[dict[str, Any]] | None = None,
) -> None:
    """Run the context's agent on `text` — replaying `journal` first when resuming — and
    always end the log with a `done` frame."""

    async def handoff(agent_name: str, run: Run, text: str) -> None:
        factory = registry.agents.get(agent_name)
        if factory is None:
            raise LookupError(f"no agent named {agent_name!r} to hand off to")
        await factory().run(run.handed_to(), text)

    run = Run(
        context_id=context.id,
        run_id=log.run_id,
        history=context.history,
        state=context.state,
        log=log,
        handoff=handoff,
        journal=journal,
    )
    start = Start(len(context.history), context.state.to_json())
    over = asyncio.Event()
    flusher = asyncio.create_task(flush_periodically(registry, log, asyncio.current_task(), over))
    outcome = Outcome("end")
    try:
        log.run_start(context.agent_name)
        await context.agent.run(run, text)
        if run.replaying:
            raise ReplayMismatch("the resumed run ended before replaying its journal")
    except Suspend as suspension:
        outcome = Outcome("interrupted", suspension.request)
    except asyncio.CancelledError:
        outcome = Outcome("stopped" if log.stop_requested else "interrupted")
        raise
    except RunTooLong:
        failure(log, "run_too_long", "The run sent too many frames")
        outcome = Outcome("error")
    except Exception:
        # The exception text may hold anything private; it stays in the server log.
        failure(log, "agent_error", "The agent failed")
        outcome = Outcome("error")
    finally:
        over.set()
        log.stop_flushing()
        try:
            await asyncio.wait_for(asyncio.shield(flusher), FLUSH_INTERVAL * 20)
        except (TimeoutError, asyncio.CancelledError):
            flusher.cancel()
        await finish(registry, context, log, run, text, start, outcome)


@dataclass(frozen=True)
class Start:
    """Where a run began: what a suspension rolls back to, so its resume can replay."""

    history_length: int
    state: dict[str, Any]


@dataclass(frozen=True)
class Outcome:
    stop_reason: wire.StopReason
    suspended: wire.InterruptRequest | None = None


async def finish(
    registry: ContextRegistry,
    context: Context,
    log: RunLog,
    run: Run,
    text: str,
    start: Start,
    outcome: Outcome,
) -> None:
    """Save the run's outcome and its last frames in one step, then send `done`."""
    record = context.record
    if outcome.suspended is not None:
        # The resume replays this run from its start: keep its steps in the checkpoint,
        # not in the history and state, where the replay would do them twice.
        del record.history[start.history_length :]
        context.state.restore(start.state)
        record.suspended = {
            "runId": log.run_id,
            "text": text,
            "journal": run.journal,
            "interrupt": outcome.suspended.model_dump(by_alias=True),
        }
    else:
        reply = "".join(run.replayed_text) + run.text
        record.add_message(
            {"role": "assistant", "content": reply, "stopReason": outcome.stop_reason}
        )
    if run.text or run.tool_calls or outcome.stop_reason != "end":
        record.add_turn(public_turn("assistant", run.text, run.tool_calls, outcome.stop_reason))
    record.active_run = None
    done = log.encode(
        wire.DoneFrame,
        log.reserve_seq(),
        text=run.text,
        tool_calls=run.tool_calls,
        stop_reason=outcome.stop_reason,
    )
    stored = len(log.frames)
    try:
        await registry.save(context, events=[*log.unflushed, done])
    except Exception:
        # Nothing of this run's end landed; the stored run stays marked and is recorded
        # as interrupted when the context is next loaded.
        failure(log, "store_error", "The reply could not be saved")
        log.publish(
            log.encode(
                wire.DoneFrame,
                log.reserve_seq(),
                text=run.text,
                tool_calls=run.tool_calls,
                stop_reason="error",
            ),
            last=True,
        )
    else:
        log.flushed = stored
        log.publish(done, stored=True, last=True)
    finally:
        context.run = None
        await registry.release(context)
