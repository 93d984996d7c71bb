"""The runner: one run of an agent, from its durable start to its recorded end.

The run executes in its own task, not in the HTTP response: a client that disconnects
does not stop the run, and any number of readers follow its log (`runlog.py`).

Persistence happens at the two edges of a run, with the frames flushed in between.
`begin_run` saves the user's message and marks the run active before the first frame is
sent. While the run goes, its frames are appended to the store's event log in batches
(`flushing.py`). `finish` saves the reply, the tool records, the AgentState writes (with
their audit) and the last frames including `done` in one atomic save, and only then
sends `done`. A process killed in between leaves the marked run, which the registry
records as interrupted (with a `done` frame of its own) on next load: completed turns
intact, nothing half-written.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thinwire import wire
from thinwire.agent import Run
from thinwire.branches import Position
from thinwire.codes import RETRYABLE_CODES, ServerErrorCode
from thinwire.contexts import Context, ContextRegistry
from thinwire.errors import LeaseLost, ModelError, RunTooLong, StateValueError, VersionConflict
from thinwire.exchanges import checked
from thinwire.flushing import start_flushing
from thinwire.ids import new_run_id
from thinwire.interrupts import ReplayMismatch, Suspend, SuspendCaught
from thinwire.jsontext import encodable
from thinwire.metrics import METRICS
from thinwire.records import Checkpoint, ContextRecord, shortened, visible
from thinwire.runlog import RunLog, shown
from thinwire.stores import Event, Store
from thinwire.turns import ending_exchange, exchange_of

__all__ = ["begin_run", "execute"]

#: The most of a `ModelError`'s reason a client is shown, in characters.
REASON_LENGTH = 100

logger = logging.getLogger("thinwire.runs")


async def begin_run(
    registry: ContextRegistry,
    context: Context,
    text: str | None,
    *,
    run_id: str | None = None,
    answering: str | None = None,
    decision: Any = None,
    data: dict[str, Any] | None = None,
    message_id: str | None = None,
    request_id: str | None = None,
    fork: Callable[[ContextRecord], Position] | None = None,
    after: str | None = None,
    through: str | None = None,
) -> RunLog:
    """Hold the context and durably record the run's start: the user's `text`, or the
    answer `decision` to the pending interrupt `answering`; after the branch shown, or beside the
    exchange `fork` finds in the record once it is held (a regenerated reply, an edited
    message) — without `text`, on that exchange's message again (a regenerate). With
    `after` (the id of the turn a client's view ends with), on the branch that ends with
    its exchange: shown first if it is another, `branch_moved` if the conversation went on
    from it, `turn_not_found` if it never had that turn. With `through` (the id of a turn
    whose exchange `fork` forks beside), the latest branch through it is shown first when
    it is not on the branch shown; `turn_not_found` if the conversation never had it.
    Either switch is said in the run's `run_start` (`branchSwitched`). `context_busy` if
    the context is held, `decision_pending` if it waits for an answer and this is not
    one: before anything `after`, `through` or `fork` finds."""
    run_id = run_id or new_run_id()
    await registry.acquire(context, "decision" if answering else "run")
    switched = False
    try:
        record = context.record
        resumed = record.resume(answering, decision) if answering is not None else None
        # Refused before anything changes.
        ends = None if after is None else await ending_exchange(registry.store, record, after)
        forks = (
            None
            if through is None
            else await exchange_of(registry.store, record.id, through, record)
        )
        if ends is not None and ends != record.lines.leaf:
            switched = True
            await show_whole_branch(registry.store, record, ends)
        elif forks is not None and not record.lines.on_branch(forks):
            switched = True
            await show_whole_branch(registry.store, record, forks)
        beside = None
        if fork is not None:  # a new branch: the whole of the one it forks from in hand
            await registry.store.load_branch(record)
            beside = fork(record)
            if text is None:  # a regenerate: the message of the exchange beside, again
                asked = record.exchanges[beside].messages[0]
                text, data = asked["content"], asked.get("data")
        trim_before = record.start_run(
            run_id,
            text,
            data=data,
            message_id=message_id,
            fork=beside,
            at=time.time(),
            resumed=resumed,
        )
        # Keep the frames of this run and the one before it; older ones are done with.
        await registry.save(context, trim_before=trim_before, compact=False)  # the run goes on
    except BaseException:
        if switched:  # the branch shown changed in hand only: the store's stays
            registry.forget_cached(context)
        await registry.release(context)
        raise
    assert record.active_run is not None
    log = context.log = RunLog(
        context, run_id, record.active_run.seq_lease, request_id, switched=switched
    )
    return log


async def show_whole_branch(store: Store, record: ContextRecord, position: Position) -> None:
    """Show the latest branch through the exchange at `position`, as a switch to it does,
    with the whole of it in hand."""
    await store.load_branch(record)  # the branch shown, whole: what a switch starts from
    record.show(position)
    await store.load_branch(record)
    record.recount()


def failure(
    log: RunLog, code: ServerErrorCode, what: str, *, retryable: bool | None = None
) -> None:
    """Log the exception under a reference and send the client only the reference."""
    reference = "err-" + secrets.token_hex(6)
    logger.exception("%s in %s (%s)", what, log.context.id, reference)
    if retryable is None:
        retryable = code in RETRYABLE_CODES
    log.error(code, f"{what}. Reference: {reference}.", retryable=retryable)


def model_failed(reason: object) -> str:
    """What a client is told of a `ModelError`: its reason is the developer's text, so it
    goes as one short line that reads as it says (`shortened`), like a title."""
    shown = shortened(str(reason), REASON_LENGTH)
    return f"The model failed ({shown})" if visible(shown) else "The model failed"


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
        state, source = context.state, context.state.source
        state.source = f"agent:{agent_name}"  # its writes are audited as its own
        handed = run.handed_to()
        try:
            await factory().run(handed, text)
        finally:
            # Its part is over: what it left running must not write as the one it handed
            # back to (its writes would be audited as that agent's).
            handed.end(f" for {agent_name!r}, whose handoff returned")
            state.source = source

    agent_name = context.agent_name
    METRICS.run_started(agent_name)
    try:
        log.run_start(agent_name, *context.record.next_turn_ids())
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
        active = context.record.active_run
        if journal and active is not None and active.kept is not None:
            context.state.expect_replay(active.kept)
        start = Start(context.record.running_exchange.size, context.state.to_json(), time.time())
    except Exception:
        # The run could not even be set up: it ends at once, its conversation freed.
        try:
            abandon(registry, context, log, "The run could not start")
        finally:
            METRICS.run_ended(agent_name, "error")
            await release(registry, context)
        return
    context.state.run_id = log.run_id  # the audit trail names the run behind each write
    flushing = start_flushing(registry, log, asyncio.current_task())
    outcome = Outcome("end")
    try:
        # If the agent asked a person and then went on rather than stop for the answer
        # (it caught the `Suspend`), `SuspendCaught`: the question it sent cannot be
        # answered, so the run must not end as if it had not asked. (Inline: a coroutine
        # of its own would be one more frame for every await of the agent to pass.)
        try:
            await context.agent.run(run, text)
        except Suspend as suspension:
            if log.asked is not None and suspension.request is not log.asked:
                raise SuspendCaught(log.asked) from suspension  # it went on to ask again
            raise
        except Exception as exc:
            if log.asked is not None:
                raise SuspendCaught(log.asked) from exc
            raise
        finally:
            # Before anything awaits: a task the agent left running must not add to the
            # run being saved, nor to the conversation after it (see `Run.end`); a tool
            # call it left running ends with the run, before its error or `done`.
            run.end()
            run.end_tool_calls()
        if log.asked is not None:
            raise SuspendCaught(log.asked)
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
        failure(log, "agent_error", model_failed(exc.reason), retryable=exc.retryable)
        outcome = Outcome("error")
    except Exception:
        # The exception text may hold anything private; it stays in the server log.
        failure(log, "agent_error", "The agent failed")
        outcome = Outcome("error")
    finally:
        ended_as: wire.StopReason = "interrupted"  # unless its end is recorded
        try:
            await flushing.stop()
            ended_as = await finish(registry, context, log, run, text, start, outcome)
        finally:
            METRICS.run_ended(agent_name, ended_as)


async def finish(
    registry: ContextRegistry,
    context: Context,
    log: RunLog,
    run: Run,
    text: str,
    start: Start,
    outcome: Outcome,
) -> wire.StopReason:
    """Save the run's outcome and its last frames in one step, then send `done`. However
    that goes, the run ends: its stream gets `done` and its conversation is free. Its
    stop reason, as its `done` says."""
    METRICS.used(run.usage)  # spent, whether or not the save lands
    try:
        try:
            outcome = storable(context, log, run, outcome)
            done = settle(context, log, run, text, start, outcome)
        except Exception:
            abandon(registry, context, log, "The run's end could not be recorded")
            return "error"
        stored = len(log.frames)
        try:
            await registry.save(context, events=log.unflushed_and(done))
        except (LeaseLost, VersionConflict):
            # Another replica holds the conversation: nothing of this run's end landed,
            # and the run is recorded as interrupted — by that replica already, or at the
            # next load. Expected of a replica paused past its lease: no failure.
            logger.warning(
                "%s was taken over before run %s could save its end: interrupted",
                context.id,
                log.run_id,
            )
            done = await taken_over(registry, log)
            log.publish(done, last=True)
            return stop_reason_of(done)
        except Exception:
            # Nothing of this run's end landed; the stored run stays marked and is
            # recorded as interrupted when the context is next loaded, with the reply its
            # frames in the store show. Its `done` says that, not what went unsaved: what
            # the client shows is then what a reload shows.
            failure(log, "store_error", "The reply could not be saved")
            done = await taken_over(registry, log)
            log.publish(done, last=True)
            return stop_reason_of(done)
        log.flushed = stored
        log.publish(done, stored=True, last=True)
        if outcome.suspended is not None:
            METRICS.asked(context.agent_name)
        return outcome.stop_reason
    finally:
        await release(registry, context)


def stop_reason_of(done: Event) -> wire.StopReason:
    reason: wire.StopReason = json.loads(done.data)["stopReason"]
    return reason


async def release(registry: ContextRegistry, context: Context) -> None:
    context.log = None
    context.state.run_id = None
    await registry.release(context)


def abandon(registry: ContextRegistry, context: Context, log: RunLog, what: str) -> None:
    """End the run on a fault of ours (or a value of the agent's that slipped past the
    checks): `error`, and a `done` that claims no reply. The cached copy may be half
    changed: dropped, so the next use loads the stored truth, where the run is recorded
    as interrupted, its reply rebuilt from the frames the store has."""
    registry.forget_cached(context)
    failure(log, "agent_error", what)
    empty = log.encode(
        wire.DoneFrame, log.reserve_seq(), text="", tool_calls=[], stop_reason="error"
    )
    log.publish(empty, last=True)


def storable(context: Context, log: RunLog, run: Run, outcome: Outcome) -> Outcome:
    """The outcome to record, once nothing the save cannot write is left of the run.

    What an agent hands over is checked as it does (a message added to the history, a
    tool's output), but a value it changes in place afterwards — a message given a set
    once appended — would fail the save, and the reply with it. Its messages are left
    out instead, and the run fails as on an exception of the agent's, its reply kept.
    Likewise text UTF-8 cannot carry that a check missed, in what the run said or wrote
    to AgentState: it is replaced (U+FFFD), as the run's frames had it."""
    said = run.storable_text()
    written = context.state.storable_writes()
    problem = left_out(context, run, outcome)
    if problem is None and not (said and written):
        problem = StateValueError(
            "text the run said or wrote to AgentState is not valid Unicode (a lone "
            "surrogate); saved with U+FFFD in its place"
        )
    if problem is None:
        return outcome
    try:
        raise problem  # so that the log shows it as the run's exception
    except StateValueError:
        if outcome.stop_reason == "error":  # the client was told of the failure already
            logger.exception("A value the run kept is not storable in %s", log.context.id)
        else:
            failure(log, "agent_error", "The agent failed")
    return Outcome("error")


def left_out(context: Context, run: Run, outcome: Outcome) -> StateValueError | None:
    """What is wrong with the messages the run added (left out of the history) or the
    journal a suspended run would keep; None when the store can write them."""
    exchange = context.record.running_exchange
    journal = run.journal if outcome.suspended is not None else []
    if encodable(exchange.messages) and encodable(journal):
        return None
    first = len(run.history) - exchange.size
    kept, refused = [], []
    for index, message in enumerate(exchange.messages):
        try:
            kept.append(checked(message, first + index))
        except (StateValueError, RecursionError) as exc:
            refused.append(exc)
    exchange.messages[:] = kept
    return StateValueError(
        f"{refused[0]} (changed after it was added?); left out of the saved history"
        if refused
        else "a step's or tool's result was changed, once recorded, into a value JSON "
        "cannot hold; the run cannot wait for a decision with it"
    )


def settle(
    context: Context, log: RunLog, run: Run, text: str, start: Start, outcome: Outcome
) -> Event:
    """Record the run's outcome in the context's record; its `done` frame."""
    record = context.record
    now = time.time()
    if run.usage:
        record.add_usage(log.run_id, run.usage, now)
    if run.title is not None:
        record.name(run.title, "agent")
    shown = run.shown()
    shown.meta.update(startedAt=start.at, finishedAt=now)
    if outcome.suspended is not None:
        kept = context.state.with_writes()
        kept["messages"] = record.running_exchange.messages[start.messages :]
        checkpoint = Checkpoint(
            run_id=log.run_id,
            text=text,
            journal=run.journal,
            interrupt=outcome.suspended.model_dump(by_alias=True),
            data=run.data or None,
            kept=kept,
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
    return ended(log, run, outcome.stop_reason)


async def taken_over(registry: ContextRegistry, log: RunLog) -> Event:
    """The `done` of a run taken over before it could save its end, or whose end the
    store refused, with the reply as the store keeps it. That is the `done` the replica
    that took over recorded, or else what the next load of the context records: what the
    run's frames in the store show, `stopped` if a stop was asked for through the
    coordinator (from another replica), else `interrupted`; if the store cannot be read,
    what this replica flushed of them."""
    store = registry.store
    try:
        events = await store.read_events(log.context.id, log.seqs[0] - 1 if log.seqs else 0)
    except Exception:  # whatever it is, the run's stream still ends
        frames = log.frames[: log.flushed]
    else:
        mine = [event for event in events if event.run_id == log.run_id]
        recorded = [event for event in mine if json.loads(event.data)["type"] == "done"]
        if recorded:
            return recorded[-1]
        frames = [event.data for event in mine]
    text, calls, _ = shown(frames)  # a done says no thinking
    try:
        stopped = await registry.coordinator.stop_requested(log.run_id)
    except Exception:  # as the next load would find it, if it could ask
        stopped = False
    return log.encode(
        wire.DoneFrame,
        log.reserve_seq(),
        text=text,
        tool_calls=[call["name"] for call in calls],
        stop_reason="stopped" if stopped else "interrupted",
    )


def ended(log: RunLog, run: Run, stop_reason: wire.StopReason) -> Event:
    return log.encode(
        wire.DoneFrame,
        log.reserve_seq(),
        text=run.text,
        tool_calls=run.tool_calls,
        stop_reason=stop_reason,
    )
