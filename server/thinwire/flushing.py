"""Flushes: a running run's frames appended to the store's event log as it goes, between
its durable start and its recorded end (`runner.py`).

With a store of one process, only a crash reads these frames (a reply keeps what its
flushed frames showed). One flusher per event loop serves every run: a tick every
FLUSH_INTERVAL flushes the runs that are due all together, so the database lands their
writes in a commit or two rather than a commit each (a commit cost a run of 100 tokens
more than its frames did). The runs streaming share a budget of
LOCAL_FLUSHES_PER_SECOND: with more of them, each is flushed less often, up to every
LOCAL_FLUSH_INTERVAL_MAX seconds, so a crash under load loses up to a second of a
reply's tail. A run that sends nothing (one waiting on a slow tool) costs nothing.

With a shared store (Redis) the flushes are what other replicas follow, and the run's
lease must be kept and a stop asked for elsewhere heeded: each run has a flusher of its
own, every FLUSH_INTERVAL.

A store that refuses writes (a full disk) fails every flush of every run, 20 a second:
the log says so once per run, with the first failure's traceback, then how many failed
once flushing works again or the run ends (`Failures`).
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
import weakref
from typing import TYPE_CHECKING, Any

from thinwire.metrics import METRICS

if TYPE_CHECKING:
    from thinwire.contexts import ContextRegistry
    from thinwire.readiness import Writes
    from thinwire.runlog import RunLog
    from thinwire.stores import Store

__all__ = ["FLUSH_INTERVAL", "Flushing", "start_flushing"]

logger = logging.getLogger("thinwire.runs")

#: Seconds between flushes of a running run's frames to the store's event log.
FLUSH_INTERVAL = 0.05
#: With a store of one process, the flushes a second of all runs together.
LOCAL_FLUSHES_PER_SECOND = 200
LOCAL_FLUSH_INTERVAL_MAX = 1.0
#: How long a run's end waits for a flush of it under way.
FLUSH_WAIT = FLUSH_INTERVAL * 20


class Flushing(abc.ABC):
    """A run's flushes, started with it; `stop` once it is over, before its final save."""

    @abc.abstractmethod
    async def stop(self) -> None: ...


def start_flushing(
    registry: ContextRegistry, log: RunLog, task: asyncio.Task[Any] | None
) -> Flushing:
    if registry.coordinator.keepalive is None:
        return LocalFlushing(registry.store, log, registry.writes)
    return LeasedFlushing(registry, log, task)


class Failures:
    """A run's failed flushes: the first logged with its traceback, the others counted,
    and said in one line once a flush lands again or the run ends. Each marks the store
    as refusing writes, when it did (`readiness.py`)."""

    def __init__(self, log: RunLog, writes: Writes | None = None) -> None:
        self.log = log
        self.writes = writes
        self.count = 0

    def failed(self, exc: Exception) -> None:
        """In the handler of `exc`, which a flush raised."""
        if self.writes is not None:
            self.writes.failed(exc)
        METRICS.write_failed("flush")
        self.count += 1
        if self.count == 1:
            logger.warning("flushing frames of %s failed", self.log.context.id, exc_info=True)

    def landed(self) -> None:
        if self.count:
            logger.info(
                "flushing frames of %s failed %d time(s), and works again",
                self.log.context.id,
                self.count,
            )
            self.count = 0

    def ended(self) -> None:
        if self.count:
            logger.warning(
                "flushing frames of %s failed %d time(s), until run %s ended",
                self.log.context.id,
                self.count,
                self.log.run_id,
            )
            self.count = 0


class LocalFlushing(Flushing):
    def __init__(self, store: Store, log: RunLog, writes: Writes | None = None) -> None:
        self.log = log
        self.flusher = Flusher.of(asyncio.get_running_loop())
        self.flusher.add(log, store, writes)

    async def stop(self) -> None:
        await self.flusher.remove(self.log)


class Flusher:
    """The flushes of every run on one event loop, with stores of one process each."""

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Flusher:
        flusher = _flushers.get(loop)
        if flusher is None:
            flusher = _flushers[loop] = cls(loop)
        return flusher

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        #: Each running run's log: its store, and when it was last flushed (or started).
        self.runs: dict[RunLog, tuple[Store, float]] = {}
        #: Each running run's failed flushes.
        self.failures: dict[RunLog, Failures] = {}
        self._ticking: asyncio.Task[None] | None = None
        #: The runs of the tick flushing now, and that tick's end.
        self._flushing: set[RunLog] = set()
        self._flushed: asyncio.Future[None] | None = None

    def add(self, log: RunLog, store: Store, writes: Writes | None = None) -> None:
        self.runs[log] = (store, time.monotonic())
        self.failures[log] = Failures(log, writes)
        if self._ticking is None:
            self._ticking = self.loop.create_task(self._tick(), name="thinwire-flusher")

    async def remove(self, log: RunLog) -> None:
        """The run is over: no more flushes of it, once one under way has landed."""
        self.runs.pop(log, None)
        if log in self._flushing and self._flushed is not None:
            await asyncio.wait([self._flushed], timeout=FLUSH_WAIT)
        failures = self.failures.pop(log, None)
        if failures is not None:
            failures.ended()

    async def _tick(self) -> None:
        try:
            while self.runs:
                await asyncio.sleep(FLUSH_INTERVAL)
                due = self._due(time.monotonic())
                if due:
                    await self._flush(due)
        finally:
            self._ticking = None

    def _due(self, now: float) -> list[tuple[RunLog, Store]]:
        streaming = [
            (log, store, last)
            for log, (store, last) in self.runs.items()
            if log.flushed < len(log.frames)
        ]
        interval = min(
            max(FLUSH_INTERVAL, len(streaming) / LOCAL_FLUSHES_PER_SECOND),
            LOCAL_FLUSH_INTERVAL_MAX,
        )
        # Half a tick early is on time: ticks come late, never early.
        on_time = now - interval + FLUSH_INTERVAL / 2
        due = [(log, store) for log, store, last in streaming if last <= on_time]
        for log, store in due:
            self.runs[log] = (store, now)
        return due

    async def _flush(self, due: list[tuple[RunLog, Store]]) -> None:
        self._flushing = {log for log, _ in due}
        self._flushed = self.loop.create_future()
        try:
            # Started together, the writes wait for one commit together.
            await asyncio.gather(*(self._flush_one(log, store) for log, store in due))
        finally:
            self._flushed.set_result(None)
            self._flushing = set()

    async def _flush_one(self, log: RunLog, store: Store) -> None:
        # A run removed while its flush went (past FLUSH_WAIT) has its failure said alone.
        failures = self.failures.get(log) or Failures(log)
        try:
            await log.flush(store)
        except Exception as exc:
            # The frames stay unflushed and go with the run's final save.
            failures.failed(exc)
        else:
            failures.landed()


_flushers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Flusher] = (
    weakref.WeakKeyDictionary()
)


class LeasedFlushing(Flushing):
    """A run's own flusher, with a shared store: flushes every FLUSH_INTERVAL, keeps its
    lease, heeds a stop asked for on another replica. Ended by `stop`, not by
    cancellation, which a store client may swallow mid-command."""

    def __init__(
        self, registry: ContextRegistry, log: RunLog, task: asyncio.Task[Any] | None
    ) -> None:
        self.registry = registry
        self.log = log
        self.task = task
        self.over = False
        self.failures = Failures(log, registry.writes)
        self.flusher = asyncio.create_task(self._run())

    async def stop(self) -> None:
        self.over = True
        self.log.stop_flushing()
        try:
            await asyncio.wait_for(asyncio.shield(self.flusher), FLUSH_WAIT)
        except (TimeoutError, asyncio.CancelledError):
            self.flusher.cancel()
        self.failures.ended()

    async def _run(self) -> None:
        registry, log = self.registry, self.log
        coordinator = registry.coordinator
        keepalive = coordinator.keepalive
        assert keepalive is not None
        renewed = time.monotonic()
        while not self.over:
            await log.flusher_pause(FLUSH_INTERVAL)
            if self.over:
                return
            try:
                # Due by the clock, not by ticks: a process paused (or a loop stalled)
                # past `keepalive` checks its lease before it flushes or sends more.
                if time.monotonic() - renewed >= keepalive:
                    if not await registry.renew(log.context):
                        # Another replica may run this conversation now: going on
                        # would repeat what its tools do, for a reply it cannot save.
                        logger.warning("lost the lease of %s mid-run: interrupting", log.context.id)
                        if self.task is not None:
                            self.task.cancel()
                        return
                    renewed = time.monotonic()
                await log.flush(registry.store)
                if self.task is not None and await coordinator.stop_requested(log.run_id):
                    log.stop_requested = True
                    self.task.cancel()
                    return
            except Exception as exc:
                # The frames stay unflushed and go with the run's final save.
                self.failures.failed(exc)
            else:
                self.failures.landed()
