"""The run log's hot path: pumping a live log to a reader (`Follower.pump`).

A frame appended while the reader is idle leaves at once, sent as the reader's task; the
frames of a burst after it leave together at the next tick; a send that does not
complete at once is finished by the reader's task; a send in flight too long ends the
pump with TimeoutError; an idle pump heart-beats. Each test is bounded in time and waits
on events, never on a sleep that hopes a race is over.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from thinwire import runlog
from thinwire.runlog import BATCH_CHARS, Batch, Follower, RunLog
from thinwire.stores import Event

CONTEXT = "ctx-" + "0" * 36
request_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_var", default="")


def new_log() -> RunLog:
    context: Any = SimpleNamespace(id=CONTEXT, record=SimpleNamespace(last_seq=0))
    return RunLog(context, "run-1", seq_lease=10_000)


def run(test: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        await asyncio.wait_for(test(), 10)

    asyncio.run(bounded())


def finish(log: RunLog) -> None:
    seq = log.reserve_seq()
    log.publish(Event(seq, log.run_id, f'{{"seq":{seq},"type":"done"}}', 0.0), last=True)


class Recorder:
    """A reader's sends: what each carried, and an event per send."""

    def __init__(self) -> None:
        self.sends: list[Batch | None] = []
        self.sent = asyncio.Event()

    async def send(self, batch: Batch | None) -> None:
        self.sends.append(batch)
        self.sent.set()

    @property
    def seqs(self) -> list[int]:
        return [seq for batch in self.sends if batch for seq, _ in batch]


def test_a_frame_leaves_at_once_and_a_burst_after_it_in_one_send_next_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runlog, "COALESCE_S", 3600.0)  # every frame after a send is "soon"

    async def test() -> None:
        log = new_log()
        reader = Recorder()
        pump = asyncio.create_task(log.follow(0).pump(reader.send, timeout=5))
        await asyncio.sleep(0)  # the pump registers and goes idle
        log.token("a")
        assert reader.seqs == [1]  # sent from the appending task, before it goes on
        log.token("b")
        log.token("c")
        assert reader.seqs == [1]  # a burst: left for the next tick
        reader.sent.clear()
        await reader.sent.wait()
        assert [len(batch or []) for batch in reader.sends] == [1, 2]
        finish(log)
        await pump
        assert reader.seqs == [1, 2, 3, 4]
        first = reader.sends[0]
        assert first is not None and first[0][1].endswith('"type":"token","delta":"a"}')
        assert log.outlets == []

    run(test)


def test_frames_apart_leave_one_send_each_from_the_appending_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(runlog, "COALESCE_S", 0.0)

    async def test() -> None:
        log = new_log()
        reader = Recorder()
        pump = asyncio.create_task(log.follow(0).pump(reader.send, timeout=5))
        await asyncio.sleep(0)
        for n, delta in enumerate("abc", start=1):
            log.token(delta)
            assert reader.seqs == list(range(1, n + 1))
        finish(log)
        await pump
        assert [len(batch or []) for batch in reader.sends] == [1, 1, 1, 1]

    run(test)


def test_a_follower_that_joins_late_starts_after_its_seq_and_catches_up_in_its_task() -> None:
    async def test() -> None:
        log = new_log()
        for delta in "abcde":
            log.token(delta)
        reader = Recorder()
        pump = asyncio.create_task(log.follow(2).pump(reader.send, timeout=5))
        await reader.sent.wait()
        finish(log)
        await pump
        assert reader.seqs == [3, 4, 5, 6]

    run(test)


def test_two_readers_of_one_log_each_get_every_frame_once() -> None:
    async def test() -> None:
        log = new_log()
        first, second = Recorder(), Recorder()
        pumps = [
            asyncio.create_task(log.follow(0).pump(reader.send, timeout=5))
            for reader in (first, second)
        ]
        await asyncio.sleep(0)
        for n in range(50):
            log.token(f"w{n} ")
            if n % 7 == 0:
                await asyncio.sleep(0)
        finish(log)
        await asyncio.gather(*pumps)
        assert first.seqs == second.seqs == list(range(1, 52))

    run(test)


def test_a_send_that_waits_is_finished_by_the_readers_task_and_later_frames_follow() -> None:
    async def test() -> None:
        log = new_log()
        writable = asyncio.Event()
        sends: list[tuple[list[int], asyncio.Task[Any] | None]] = []

        async def send(batch: Batch | None) -> None:
            seqs = [seq for seq, _ in batch or []]
            if seqs == [1]:
                await writable.wait()  # the client's buffer is full
            sends.append((seqs, asyncio.current_task()))

        pump = asyncio.create_task(log.follow(0).pump(send, timeout=5))
        await asyncio.sleep(0)
        log.token("a")
        await asyncio.sleep(0)  # the callback starts the send; it waits
        log.token("b")
        log.token("c")
        await asyncio.sleep(0)
        assert sends == []  # nothing overtakes the send in flight
        writable.set()
        finish(log)
        await pump
        assert [seqs for seqs, _ in sends] == [[1], [2, 3, 4]]
        assert all(task is pump for _, task in sends)

    run(test)


def test_a_send_runs_as_the_readers_task_in_its_context() -> None:
    async def test() -> None:
        log = new_log()
        seen: list[tuple[asyncio.Task[Any] | None, str]] = []
        done = asyncio.Event()

        async def send(batch: Batch | None) -> None:
            seen.append((asyncio.current_task(), request_var.get()))
            done.set()

        async def reader() -> None:
            request_var.set("req-7")
            await log.follow(0).pump(send, timeout=5)

        pump = asyncio.create_task(reader())
        await asyncio.sleep(0)
        log.token("a")
        await done.wait()
        finish(log)
        await pump
        assert seen[0] == (pump, "req-7")

    run(test)


def test_a_send_that_fails_ends_the_pump_with_its_error() -> None:
    async def test() -> None:
        log = new_log()

        async def send(batch: Batch | None) -> None:
            raise ConnectionResetError("gone")

        pump = asyncio.create_task(log.follow(0).pump(send, timeout=5))
        await asyncio.sleep(0)
        log.token("a")
        with pytest.raises(ConnectionResetError):
            await pump
        assert log.outlets == []

    run(test)


def test_a_reader_that_takes_nothing_is_cut_off_by_the_timeout() -> None:
    async def test() -> None:
        log = new_log()
        cleaned = asyncio.Event()

        async def send(batch: Batch | None) -> None:
            try:
                await asyncio.Event().wait()  # never writable again
            finally:
                cleaned.set()

        pump = asyncio.create_task(log.follow(0).pump(send, timeout=0.05))
        await asyncio.sleep(0)
        log.token("a")
        with pytest.raises(TimeoutError):
            await pump
        assert cleaned.is_set() and log.outlets == []
        log.token("b")  # the run goes on: nobody is notified any more

    run(test)


def test_a_disconnect_cancels_a_send_in_flight_and_the_run_goes_on() -> None:
    async def test() -> None:
        log = new_log()
        waiting, cancelled = asyncio.Event(), asyncio.Event()

        async def send(batch: Batch | None) -> None:
            waiting.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancelled.set()
                raise

        pump = asyncio.create_task(log.follow(0).pump(send, timeout=5))
        await asyncio.sleep(0)
        log.token("a")
        await waiting.wait()
        pump.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pump
        assert cancelled.is_set() and log.outlets == []
        log.token("b")
        assert log.frames[-1].endswith('"delta":"b"}')

    run(test)


def test_an_idle_reader_gets_heartbeats() -> None:
    async def test() -> None:
        log = new_log()
        reader = Recorder()
        pump = asyncio.create_task(log.follow(0, heartbeat=0.02).pump(reader.send, timeout=5))
        await reader.sent.wait()
        assert reader.sends == [None]
        reader.sent.clear()
        log.token("a")
        await reader.sent.wait()
        finish(log)
        await pump
        assert reader.seqs == [1, 2]

    run(test)


def test_take_bounds_a_batch() -> None:
    log = new_log()
    for _ in range(3):
        log.token("x" * (BATCH_CHARS // 2))
    follower = Follower(log, 0, None)
    assert [seq for seq, _ in follower.take()] == [1, 2]
    assert [seq for seq, _ in follower.take()] == [3]
    assert follower.take() == []
