"""The runner: one run of an agent, from its durable start to its recorded end.

The run executes in its own task, not in the HTTP response: a client that disconnects
does not stop the run, and any number of readers follow its log (`runlog.py`).

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
import logging
import secrets
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thinwire import wire
from thinwire.agent import Run
from thinwire.branches import Position
from thinwire.codes import RETRYABLE_CODES, ServerErrorCode
from thinwire.contexts import Context, ContextRegistry
from thinwire.errors import ModelError, RunTooLong
from thinwire.ids import new_run_id
from thinwire.interrupts import ReplayMismatch, Suspend
from thinwire.records import Checkpoint, ContextRecord
from thinwire.runlog import RunLog

__all__ = ["begin_run", "execute"]

logger = logging.getLogger("thinwire.runs")

#: Seconds between flushes of a running run's frames to the store's event log.
FLUSH_INTERVAL = 0.05
#: With a store of one process, the flushes a second of all runs together: when more runs
#: stream than that allows every FLUSH_INTERVAL, each flushes less often, up to every
#: LOCAL_FLUSH_INTERVAL_MAX seconds. A flush (a commit, an fsync) costs more than the
#: frames it holds: at 50 ms each, 200 runs streaming at 50 tokens/s spent most of a core
#: on flushes. Only a crash reads them (a reply keeps what its flushed frames showed), so a
#: crash under load loses up to a second of a reply's tail. With a shared store (Redis)
#: the flushes are what other replicas follow: every FLUSH_INTERVAL.
LOCAL_FLUSHES_PER_SECOND = 200
LOCAL_FLUSH_INTERVAL_MAX = 1.0
#: Per event loop: the flushers with frames to flush (waiting out their interval).
_streaming: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, int] = weakref.WeakKeyDictionary()


async def begin_run(
    registry: ContextRegistry,
    context: Context,
    text: str | None,
    *,
    run_id: str | None = None,
    answering: str | None = None,
    data: dict[str, Any] | None = None,
    message_id: str | None = None,
    request_id: str | None = None,
    fork: Callable[[ContextRecord], Position] | None = None,
) -> RunLog:
    """Hold the context and durably record the run's start: the user's `text`, or the
    answer to the pending interrupt `answering`; after the branch shown, or beside the
    exchange `fork` finds in the record once it is held (a regenerated reply, an edited
    message). `context_busy` if the context is held, `decision_pending` if it waits for
    an answer and this is not one."""
    run_id = run_id or new_run_id()
    await registry.acquire(context, "decision" if answering else "run")
    try:
        record = context.record
        if answering is not None:
            record.resume(answering)
        beside = None
        if fork is not None:  # a new branch: the whole of the one it forks from in hand
            await registry.store.load_branch(record)
            beside = fork(record)
        trim_before = record.start_run(
            run_id, text, data=data, message_id=message_id, fork=beside, at=time.time()
        )
        # Keep the frames of this run and the one before it; older ones are done with.
        await registry.save(context, trim_before=trim_before, compact=False)  # the run goes on
    except BaseException:
        await registry.release(context)
        raise
    assert record.active_run is not None
    log = context.log = RunLog(context, run_id, record.active_run.seq_lease, request_id)
    return log


def failure(
    log: RunLog, code: ServerErrorCode, what: str, *, retryable: bool | None = None
) -> None:
    """Log the exception under a reference and send the client only the reference."""
    reference = "err-" + secrets.token_hex(6)
    logger.exception("%s in %s (%s)", what, log.context.id, reference)
    if retryable is None:
        retryable = code in RETRYABLE_CODES
    log.error(code, f"{what}. Reference: {reference}.", retryable=retryable)


async def flush_periodically(
    registry: ContextRegistry, log: RunLog, task: asyncio.Task[Any] | None, over: asyncio.Event
) -> None:
    """While the run goes: flush its frames and, where the coordinator asks for it, keep
    its lease and heed a stop asked for on another replica. Ends when `over` is set, not
    by cancellation, which a store client may swallow mid-command. With nothing to keep
    alive the flusher sleeps until a frame comes: a run that sends nothing (one waiting
    for a person, say) costs no wake-ups; the runs that stream share a budget of flushes
    (LOCAL_FLUSHES_PER_SECOND)."""
    coordinator = registry.coordinator
    keepalive = coordinator.keepalive
    renew_every = max(1, int(keepalive / FLUSH_INTERVAL)) if keepalive else 0
    ticks = 0
    while not over.is_set():
        if keepalive is None:
            if log.flushed >= len(log.frames):
                await log.flusher_pause(None)
                if over.is_set():
                    return
            loop = asyncio.get_running_loop()
            streaming = _streaming[loop] = _streaming.get(loop, 0) + 1
            interval = min(streaming / LOCAL_FLUSHES_PER_SECOND, LOCAL_FLUSH_INTERVAL_MAX)
            try:
                await log.flusher_pause(max(FLUSH_INTERVAL, interval))
            finally:
                _streaming[loop] -= 1
        else:
            await log.flusher_pause(FLUSH_INTERVAL)
        if over.is_set():
            return
        ticks += 1
        try:
            await log.flush(registry.store)
            if keepalive is None:
                continue
            if ticks % renew_every == 0 and not await registry.renew(log.context):
                logger.warning("lost the lease of %s mid-run", log.context.id)
            if task is not None and await coordinator.stop_requested(log.run_id):
                log.stop_requested = True
                task.cancel()
                return
        except Exception:
            # The frames stay unflushed and go with the run's final save.
            logger.warning("flushing frames of %s failed", log.context.id, exc_info=True)


@dataclass(frozen=True)
class Start:
    """Where a run began: what a suspension rolls back to, so its resume can replay (the
    messages of its exchange, its AgentState), and when."""

    messages: int
    state: dict[str, Any]
    at: float


@dataclass(frozen=True)
class Outcome:
    stop_reason: wire.StopReason
    suspended: wire.InterruptRequest | None = None


async def execute(
    registry: ContextRegistry,
    context: Context,
    log: RunLog,
    text: str,
    journal: list[dict[str, Any]] | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """Run the context's agent on `text` and the page's `data` — replaying `journal`
    first when resuming — and always end the log with a `done` frame."""

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
        data=data,
    )
    run.usage_public = context.agent.public_usage
    start = Start(context.record.running_exchange.size, context.state.to_json(), time.time())
    context.state.run_id = log.run_id  # the audit trail names the run behind each write
    over = asyncio.Event()
    flusher = asyncio.create_task(flush_periodically(registry, log, asyncio.current_task(), over))
    outcome = Outcome("end")
    try:
        log.run_start(context.agent_name, *context.record.next_turn_ids())
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
    except ModelError as exc:
        # What the model's server said stays in the log; the client learns the kind.
        failure(log, "agent_error", f"The model failed ({exc.reason})", retryable=exc.retryable)
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
    now = time.time()
    if run.usage:
        record.add_usage(log.run_id, run.usage, now)
    if run.title is not None:
        record.name(run.title, "agent")
    shown = run.shown()
    shown.meta.update(startedAt=start.at, finishedAt=now)
    if outcome.suspended is not None:
        checkpoint = Checkpoint(
            run_id=log.run_id,
            text=text,
            journal=run.journal,
            interrupt=outcome.suspended.model_dump(by_alias=True),
            data=run.data or None,
        )
        record.suspend(
            checkpoint, run.text, run.tool_calls, rollback_to=start.messages, shown=shown
        )
        context.state.restore(start.state)
    else:
        record.end_turn(
            outcome.stop_reason,
            run.text,
            run.tool_calls,
            said_before="".join(run.replayed_text),
            shown=shown,
        )
    done = log.encode(
        wire.DoneFrame,
        log.reserve_seq(),
        text=run.text,
        tool_calls=run.tool_calls,
        stop_reason=outcome.stop_reason,
    )
    stored = len(log.frames)
    try:
        await registry.save(context, events=log.unflushed_and(done))
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
        context.log = None
        context.state.run_id = None
        await registry.release(context)
