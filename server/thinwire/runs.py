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
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from thinwire import wire
from thinwire.agent import Run
from thinwire.contexts import SEQ_LEASE, Context, ContextRegistry
from thinwire.ids import new_run_id
from thinwire.interrupts import ReplayMismatch, Suspend
from thinwire.stores import Event

__all__ = ["RunLog", "RunTooLong", "begin_run", "execute", "stored_frames"]

logger = logging.getLogger("thinwire.runs")

#: Frames kept back at the end of a seq lease for the run's `error` and `done`.
CLOSING_FRAMES = 3
#: Seconds between flushes of a running run's frames to the store's event log.
FLUSH_INTERVAL = 0.05
#: How many answered interrupt ids a context remembers.
ANSWERED_KEPT = 100


class RunTooLong(RuntimeError):
    """A run emitted more frames than one seq lease allows."""


def encode_frame(
    model: type[BaseModel], context_id: str, run_id: str, seq: int, **fields: Any
) -> str:
    frame = model(context_id=context_id, run_id=run_id, seq=seq, **fields)
    return frame.model_dump_json(by_alias=True)


class RunLog:
    """Every frame of one run, in order, as encoded JSON; followers wait for more."""

    def __init__(self, context: Context, run_id: str, seq_lease: int) -> None:
        self.context = context
        self.run_id = run_id
        self.seq_lease = seq_lease
        self.seqs: list[int] = []
        self.frames: list[str] = []
        #: Frames not yet in the store's event log, oldest first.
        self.unflushed: list[Event] = []
        self.finished = False
        #: Set by a stop, so the cancellation is recorded as `stopped`, not `interrupted`.
        self.stop_requested = False
        self._changed = asyncio.Event()
        self._calls = 0

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
        if not stored:
            self.unflushed.append(event)
        self.finished = last
        self._changed.set()
        self._changed = asyncio.Event()

    def _append(self, model: type[BaseModel], **fields: Any) -> None:
        closing = model in (wire.ErrorFrame, wire.DoneFrame)
        if not closing and self.context.record.last_seq >= self.seq_lease - CLOSING_FRAMES:
            raise RunTooLong(f"a run may send at most {SEQ_LEASE - CLOSING_FRAMES} frames")
        self.publish(self.encode(model, self.reserve_seq(), **fields))

    def run_start(self, agent: str) -> None:
        self._append(wire.RunStartFrame, agent=agent)

    def thinking(self, delta: str) -> None:
        self._append(wire.ThinkingFrame, delta=delta)

    def token(self, delta: str) -> None:
        self._append(wire.TokenFrame, delta=delta)

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
        batch = list(self.unflushed)
        if batch:
            await registry.store.append_events(self.context.id, batch)
            del self.unflushed[: len(batch)]

    async def follow(
        self, after: int = 0, heartbeat: float | None = None
    ) -> AsyncIterator[tuple[int, str] | None]:
        """Yield `(seq, json)` for every frame with seq > `after` until the run is done.

        Yields None when `heartbeat` seconds pass without a frame.
        """
        index = bisect.bisect_right(self.seqs, after)
        while True:
            changed = self._changed
            while index < len(self.frames):
                yield self.seqs[index], self.frames[index]
                index += 1
            if self.finished:
                return
            try:
                await asyncio.wait_for(changed.wait(), heartbeat)
            except TimeoutError:
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
            record.history.append({"role": "user", "content": text})
            record.transcript.append(
                {"role": "user", "text": text, "toolCalls": [], "stopReason": None}
            )
        record.active_run = {"runId": run_id, "seqLease": lease}
        record.last_run = {"runId": run_id, "firstSeq": record.last_seq + 1}
        await registry.save(context)
    except BaseException:
        await registry.release(context)
        raise
    log = context.run = RunLog(context, run_id, lease)
    if previous is not None:
        # Keep the frames of this run and the one before it; older ones are done with.
        await registry.store.trim_events(context.id, previous["firstSeq"])
    return log


def failure(log: RunLog, code: str, what: str) -> None:
    """Log the exception under a reference and send the client only the reference."""
    reference = "err-" + secrets.token_hex(6)
    logger.exception("%s in %s (%s)", what, log.context.id, reference)
    log.error(code, f"{what}. Reference: {reference}.", retryable=code == "store_error")


async def flush_periodically(
    registry: ContextRegistry, log: RunLog, task: asyncio.Task[Any] | None
) -> None:
    """While the run goes: flush its frames, keep its lease, and heed a stop asked for on
    another replica."""
    ticks = 0
    renew_every = max(1, int(registry.lease_ttl / 3 / FLUSH_INTERVAL))
    while True:
        await asyncio.sleep(FLUSH_INTERVAL)
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
    flusher = asyncio.create_task(flush_periodically(registry, log, asyncio.current_task()))
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
        flusher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flusher
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
        record.history.append(
            {"role": "assistant", "content": reply, "stopReason": outcome.stop_reason}
        )
    if run.text or run.tool_calls or outcome.stop_reason != "end":
        record.transcript.append(
            {
                "role": "assistant",
                "text": run.text,
                "toolCalls": run.tool_calls,
                "stopReason": outcome.stop_reason,
            }
        )
    record.active_run = None
    done = log.encode(
        wire.DoneFrame,
        log.reserve_seq(),
        text=run.text,
        tool_calls=run.tool_calls,
        stop_reason=outcome.stop_reason,
    )
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
        log.unflushed.clear()
        log.publish(done, stored=True, last=True)
    finally:
        context.run = None
        await registry.release(context)
