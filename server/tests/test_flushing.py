"""Flushes of running runs (thinwire.flushing): with a store of one process, one flusher
per event loop flushes the runs that are due together, within a budget of flushes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import FullDisk, app_for
from thinwire import Agent, MemoryStore, Run, SQLiteStore
from thinwire.contexts import ContextRegistry, new_record
from thinwire.coordination import Coordinator, LocalCoordinator
from thinwire.coordination.base import Lease
from thinwire.demo import DemoAgent
from thinwire.flushing import (
    FLUSH_INTERVAL,
    LOCAL_FLUSH_INTERVAL_MAX,
    LOCAL_FLUSHES_PER_SECOND,
    Flusher,
)
from thinwire.runlog import RunLog
from thinwire.runner import begin_run
from thinwire.stores import LeaseLost, Store, StoreError
from thinwire.stores.sqlite.commits import Database
from thinwire.testing import frames_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def running(store: Store, count: int) -> list[RunLog]:
    """`count` runs begun, each in a conversation of its own, each with a frame."""
    registry = ContextRegistry(store, {"demo": DemoAgent})
    logs = []
    for i in range(count):
        await store.create(new_record(f"ctx-{i}", "demo", DemoAgent(), "ada"))
        context = await registry.get("demo", f"ctx-{i}", "ada")
        log = await begin_run(registry, context, "hello")
        log.run_start("demo", *context.record.next_turn_ids())
        logs.append(log)
    return logs


async def flushed(*logs: RunLog) -> None:
    """Until every frame of `logs` is flushed (a tick or two, on a busy machine more)."""
    async with asyncio.timeout(10):
        while any(log.flushed < len(log.frames) for log in logs):
            await asyncio.sleep(FLUSH_INTERVAL / 5)


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The writes of each SQLite commit, in order."""
    made: list[int] = []
    commit = Database._commit

    def counted(self: Database, works: list[Any], fsync: bool) -> Any:
        made.append(len(works))
        return commit(self, works, fsync)

    monkeypatch.setattr(Database, "_commit", counted)
    return made


async def test_the_runs_due_are_flushed_together_in_a_commit_or_two(
    tmp_path: Path, commits: list[int]
) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    logs = await running(store, 12)
    flusher = Flusher(asyncio.get_running_loop())
    for log in logs:
        flusher.add(log, store)
    for log in logs:
        log.token("half a reply")
    commits.clear()
    await flushed(*logs)
    # The first write goes at once; the other eleven share the next commit.
    assert commits == [1, 11]
    for log in logs:
        events = await store.read_events(log.context.id)
        assert [e.data for e in events] == log.frames
        await flusher.remove(log)
    await store.close()


async def test_a_run_with_nothing_new_is_not_flushed(tmp_path: Path, commits: list[int]) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    quiet, streaming = await running(store, 2)
    flusher = Flusher(asyncio.get_running_loop())
    flusher.add(quiet, store)
    flusher.add(streaming, store)
    await flushed(quiet, streaming)  # their run_start frames
    commits.clear()
    streaming.token("more")
    await flushed(streaming)
    assert commits == [1]
    await flusher.remove(quiet)
    await flusher.remove(streaming)
    await store.close()


async def test_many_runs_streaming_share_a_budget_of_flushes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    count = LOCAL_FLUSHES_PER_SECOND // 2  # each may flush every half second
    logs = await running(store, count)
    flusher = Flusher(asyncio.get_running_loop())
    for log in logs:
        flusher.add(log, store)
    started = min(last for _, last in flusher.runs.values())
    assert flusher._due(started + 0.4) == []  # not yet
    assert len(flusher._due(started + 0.5)) == count
    for log in logs:
        log.token("more")
    assert flusher._due(started + 0.9) == []  # flushed at 0.5: due again at 1.0
    assert len(flusher._due(started + 1.0)) == count
    for log in logs:
        await flusher.remove(log)
    await store.close()


async def test_however_many_runs_stream_each_is_flushed_every_second() -> None:
    store = MemoryStore()
    logs = await running(store, LOCAL_FLUSHES_PER_SECOND * 3)  # a share of 3 s each
    flusher = Flusher(asyncio.get_running_loop())
    for log in logs:
        flusher.add(log, store)
    # Adding hundreds of runs takes a while on a busy machine: none is due a tick before
    # the first one added is, and every one is once the last one added is.
    added = [last for _, last in flusher.runs.values()]
    assert flusher._due(min(added) + LOCAL_FLUSH_INTERVAL_MAX - FLUSH_INTERVAL) == []
    assert len(flusher._due(max(added) + LOCAL_FLUSH_INTERVAL_MAX)) == len(logs)
    for log in logs:
        await flusher.remove(log)


async def test_a_run_ends_after_its_flush_under_way_has_landed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    (log,) = await running(store, 1)
    flusher = Flusher(asyncio.get_running_loop())
    flusher.add(log, store)
    landed, gate = asyncio.Event(), asyncio.Event()
    flush = log.flush

    async def slow(store: Store) -> None:
        await gate.wait()  # a flush that takes its time
        await flush(store)
        landed.set()

    log.flush = slow  # type: ignore[method-assign]
    while not flusher._flushing:
        await asyncio.sleep(FLUSH_INTERVAL / 5)
    removing = asyncio.create_task(flusher.remove(log))
    await asyncio.sleep(0)
    assert not removing.done()  # waiting for the flush under way
    gate.set()
    await removing
    assert landed.is_set() and log.flushed == len(log.frames)
    await store.close()


async def test_the_flusher_stops_ticking_once_no_run_is_left(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    (log,) = await running(store, 1)
    flusher = Flusher(asyncio.get_running_loop())
    flusher.add(log, store)
    ticking = flusher._ticking
    assert ticking is not None
    await flusher.remove(log)
    await asyncio.wait_for(ticking, FLUSH_INTERVAL * 4)
    assert flusher._ticking is None
    flusher.add(log, store)  # and starts again with the next run
    assert flusher._ticking is not None
    await flusher.remove(log)
    await store.close()


async def test_a_flush_that_fails_leaves_its_frames_for_the_next_and_others_flushed(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    failing, fine = await running(store, 2)
    append = store.append_events
    refused: list[str] = []

    async def refusing(context_id: str, events: Any) -> None:
        if context_id == failing.context.id and not refused:
            refused.append(context_id)
            raise StoreError("the store is unavailable; try again shortly")
        await append(context_id, events)

    store.append_events = refusing  # type: ignore[method-assign]
    flusher = Flusher(asyncio.get_running_loop())
    flusher.add(failing, store)
    flusher.add(fine, store)
    await flushed(fine)
    assert refused == [failing.context.id]
    await flushed(failing)  # a later tick, the store answering again
    events = await store.read_events(failing.context.id)
    assert [e.data for e in events] == failing.frames
    assert flusher._ticking is not None
    await flusher.remove(failing)
    await flusher.remove(fine)
    await store.close()


class LosingLeases(LocalCoordinator):
    """Leases lost at their first renewal: another replica took the conversation."""

    keepalive = FLUSH_INTERVAL

    async def renew(self, lease: Lease) -> bool:
        return False


class Waits(Agent):
    """Says a word, then waits for ever: until its run is cancelled."""

    cancelled = False

    async def run(self, run: Run, text: str) -> None:
        await run.say("started ")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            type(self).cancelled = True
            raise


def test_a_run_whose_lease_is_lost_is_interrupted_not_left_going() -> None:
    Waits.cancelled = False
    app = app_for({"demo": Waits}, coordinator=LosingLeases())
    with TestClient(app) as client:
        frames = frames_of(client.post("/agents/demo/runs", json={"message": {"text": "go"}}))
        turns = client.get(f"/agents/demo/contexts/{frames[0]['contextId']}").json()["turns"]
    assert Waits.cancelled
    assert [f["type"] for f in frames] == ["run_start", "token", "done"]
    assert frames[-1]["stopReason"] == "interrupted" and frames[-1]["text"] == "started "
    assert [(t["text"], t["stopReason"]) for t in turns[1:]] == [("started ", "interrupted")]


class SlowToRenew(LocalCoordinator):
    """Renews every 0.3 s, and finds the lease gone: another replica took it meanwhile."""

    keepalive = 0.3

    async def renew(self, lease: Lease) -> bool:
        return False


class Stalls(Agent):
    """Says a word, then is held up past its lease's keepalive, then goes on talking."""

    async def run(self, run: Run, text: str) -> None:
        await run.say("before ")
        time.sleep(0.4)  # the whole process held up: SIGSTOP, or a loop blocked
        for n in range(30):
            await run.say(f"after{n} ")
            await asyncio.sleep(0.01)


def test_a_run_held_up_past_its_keepalive_checks_its_lease_before_going_on() -> None:
    """The renewal is due by the clock: the first tick after the hold-up finds the lease
    gone, rather than the run talking on for a reply it cannot save."""
    app = app_for({"demo": Stalls}, coordinator=SlowToRenew())
    with TestClient(app) as client:
        frames = frames_of(client.post("/agents/demo/runs", json={"message": {"text": "go"}}))
    said = [f["delta"] for f in frames if f["type"] == "token"]
    assert said[0] == "before " and len(said) <= 3, said  # 31 without the check
    assert frames[-1]["stopReason"] == "interrupted"


class OverTaken(Agent):
    """Says a word, which the store gets; then `meanwhile` (another replica taking the
    conversation over, as when this one was paused past its lease); then a word the
    store never gets, as the run's end cannot be saved."""

    store: Store
    meanwhile: Any = None

    async def run(self, run: Run, text: str) -> None:
        await run.say("kept ")
        async with asyncio.timeout(10):  # until a flush takes it to the store
            while not any("kept" in e.data for e in await self.store.read_events(run.context_id)):
                await asyncio.sleep(FLUSH_INTERVAL / 5)
        if type(self).meanwhile is not None:
            await type(self).meanwhile(run.context_id)
        await run.say("lost ")


def over_taken(
    store: MemoryStore, meanwhile: Any = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The frames of a run `OverTaken`, and the conversation's turns as stored after
    (read once the store's methods the test replaced are its own again)."""
    OverTaken.store, OverTaken.meanwhile = store, meanwhile
    with TestClient(app_for({"demo": OverTaken}, store=store)) as client:
        frames = frames_of(client.post("/agents/demo/runs", json={"message": {"text": "go"}}))
        vars(store).pop("save", None)
        vars(store).pop("read_events", None)
        turns = client.get(f"/agents/demo/contexts/{frames[0]['contextId']}").json()["turns"]
    return frames, turns


def test_a_run_taken_over_before_its_end_ends_as_the_other_replica_recorded_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No `store_error`, and a `done` whose text is what the store keeps, not the reply
    this replica could not save; the takeover is logged as what it is, not a failure."""
    store = MemoryStore()

    async def replica_b_takes_over(context_id: str) -> None:
        # Its lease expired: replica B loads the conversation and records the run as
        # interrupted, which moves the stored version on.
        await ContextRegistry(store, {"demo": DemoAgent}).get_for_operator("demo", context_id)

    with caplog.at_level("INFO", logger="thinwire"):
        frames, turns = over_taken(store, replica_b_takes_over)
    assert [f["type"] for f in frames] == ["run_start", "token", "token", "done"]
    assert frames[-1]["stopReason"] == "interrupted" and frames[-1]["text"] == "kept "
    assert [(t["text"], t["stopReason"]) for t in turns[1:]] == [("kept ", "interrupted")]
    # The very `done` replica B stored: what a client reattaching anywhere is sent.
    stored = asyncio.run(store.read_events(frames[0]["contextId"]))
    assert frames[-1] == json.loads(stored[-1].data)
    [said] = [r for r in caplog.records if r.name == "thinwire.runs"]
    assert said.levelname == "WARNING" and "taken over" in said.getMessage()
    assert said.exc_info is None


def test_a_run_fenced_out_ends_as_it_will_be_recorded() -> None:
    """Its lease passed on, no replica has recorded the run yet: its `done` says what
    the next load records, from the frames the store has."""
    store = MemoryStore()  # the run's start creates the context; its end saves it

    async def fenced_out(*args: Any, **kwargs: Any) -> None:
        raise LeaseLost("the lease of token 1 is gone")

    store.save = fenced_out  # type: ignore[method-assign]
    frames, turns = over_taken(store)
    assert "error" not in [f["type"] for f in frames]
    assert frames[-1]["stopReason"] == "interrupted" and frames[-1]["text"] == "kept "
    assert [(t["text"], t["stopReason"]) for t in turns[1:]] == [("kept ", "interrupted")]


def test_a_run_fenced_out_by_a_store_it_cannot_read_ends_with_what_it_flushed() -> None:
    store = MemoryStore()

    async def unreadable(*args: Any, **kwargs: Any) -> None:
        raise StoreError("the store is unavailable; try again shortly")

    async def fenced_out(*args: Any, **kwargs: Any) -> None:
        store.read_events = unreadable  # type: ignore[method-assign]
        raise LeaseLost("the lease of token 1 is gone")

    store.save = fenced_out  # type: ignore[method-assign]
    frames, turns = over_taken(store)
    assert [f["type"] for f in frames] == ["run_start", "token", "token", "done"]
    assert frames[-1]["stopReason"] == "interrupted" and frames[-1]["text"] == "kept "
    assert [(t["text"], t["stopReason"]) for t in turns[1:]] == [("kept ", "interrupted")]


class KeepsLeases(LocalCoordinator):
    keepalive = 10.0


class Chatty(Agent):
    """A word every flush tick or so, so that each tick has frames to flush."""

    async def run(self, run: Run, text: str) -> None:
        for n in range(12):
            await run.say(f"w{n} ")
            await asyncio.sleep(FLUSH_INTERVAL)


def test_an_outage_is_logged_once_not_every_tick(caplog: pytest.LogCaptureFixture) -> None:
    store = MemoryStore()
    append = store.append_events
    refused: list[str] = []

    async def down_a_while(context_id: str, events: Any) -> None:
        if len(refused) < 5:
            refused.append(context_id)
            raise StoreError("the store is unavailable; try again shortly")
        await append(context_id, events)

    store.append_events = down_a_while  # type: ignore[method-assign]
    app = app_for({"demo": Chatty}, store=store, coordinator=KeepsLeases())
    with caplog.at_level("INFO", logger="thinwire"), TestClient(app) as client:
        frames = frames_of(client.post("/agents/demo/runs", json={"message": {"text": "go"}}))
    assert frames[-1]["stopReason"] == "end" and len(refused) == 5
    said = [(r.levelname, r.getMessage()) for r in caplog.records if "flushing" in r.msg]
    assert [level for level, _ in said] == ["WARNING", "INFO"]  # five failed ticks, one warning
    assert said[0][1].endswith("failed") and said[1][1].endswith("works again")


class DiskFills(Agent):
    """Says a word, which a flush takes to the store; then the disk fills, and it talks
    on until three flushes were refused — then, if `frees`, the disk is freed and it
    says one more word, which a flush takes."""

    store: SQLiteStore
    disk: FullDisk
    frees = False
    #: The coordinator a stop of this run is asked through, as from another replica.
    stopped_through: Coordinator | None = None

    async def run(self, run: Run, text: str) -> None:
        cls = type(self)
        await run.say("w0 ")
        await stored(cls.store, run.context_id, "w0")
        if cls.stopped_through is not None:
            await cls.stopped_through.request_stop(run.run_id)
        cls.disk.full = True
        said = 0
        async with asyncio.timeout(10):
            while cls.disk.refused < 3:
                said += 1
                await run.say(f"w{said} ")
                await asyncio.sleep(FLUSH_INTERVAL / 2)
        if cls.frees:
            cls.disk.full = False
            await run.say("back ")
            await stored(cls.store, run.context_id, "back")


async def stored(store: Store, context_id: str, word: str) -> None:
    """Until a flush took `word` to the store."""
    async with asyncio.timeout(10):
        while not any(word in e.data for e in await store.read_events(context_id)):
            await asyncio.sleep(FLUSH_INTERVAL / 5)


@contextlib.contextmanager
def disk_fills(
    tmp_path: Path, *, frees: bool = False, stopped_elsewhere: bool = False
) -> Iterator[tuple[list[dict[str, Any]], TestClient]]:
    """The frames of a run `DiskFills`, and its app's client, the disk free again: for
    the test to read the conversation back."""
    store = SQLiteStore(tmp_path / "t.db")
    DiskFills.store, DiskFills.disk, DiskFills.frees = store, FullDisk(store), frees
    with TestClient(app_for({"demo": DiskFills}, store=store)) as client:
        server = client.app.state.thinwire  # type: ignore[attr-defined]
        DiskFills.stopped_through = server.coordinator if stopped_elsewhere else None
        try:
            frames = frames_of(client.post("/agents/demo/runs", json={"message": {"text": "go"}}))
        finally:
            DiskFills.disk.full = False
        yield frames, client


@pytest.mark.parametrize("stopped_elsewhere", [False, True])
def test_a_reply_the_store_refused_ends_live_as_a_reload_shows_it(
    tmp_path: Path, stopped_elsewhere: bool
) -> None:
    """The run's end could not be saved: its `done` says what the store kept and how the
    next load records the run (`stopped` when a stop was asked for through the
    coordinator), not the reply the client streamed and no store has."""
    reason = "stopped" if stopped_elsewhere else "interrupted"
    with disk_fills(tmp_path, stopped_elsewhere=stopped_elsewhere) as (frames, client):
        context_id = frames[0]["contextId"]
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
        replayed = frames_of(client.get(f"/agents/demo/contexts/{context_id}/events"))
    error, done = frames[-2:]
    assert (error["type"], error["code"], error["retryable"]) == ("error", "store_error", True)
    streamed = "".join(f["delta"] for f in frames if f["type"] == "token")
    assert streamed.startswith("w0 w1 w2 w3 ")
    assert (done["type"], done["text"], done["stopReason"]) == ("done", "w0 ", reason)
    said = (done["text"], done["toolCalls"], done["stopReason"])
    assert (turns[-1]["text"], turns[-1]["toolCalls"], turns[-1]["stopReason"]) == said
    assert replayed[-1]["type"] == "done"
    assert (replayed[-1]["text"], replayed[-1]["toolCalls"], replayed[-1]["stopReason"]) == said


def flush_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "thinwire.runs" and "flushing" in r.msg]


def test_a_full_disk_logs_a_runs_failed_flushes_once_and_their_count_at_its_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO", logger="thinwire"), disk_fills(tmp_path) as (frames, _):
        pass
    assert frames[-1]["stopReason"] == "interrupted"
    first, last = flush_lines(caplog)
    assert first.levelname == "WARNING" and first.exc_info is not None
    assert first.getMessage().endswith("failed")
    assert last.levelname == "WARNING" and last.exc_info is None
    refused_flushes = DiskFills.disk.refused - 1  # the last refusal: the run's final save
    assert f"failed {refused_flushes} time(s), until run {frames[0]['runId']} ended" in (
        last.getMessage()
    )


def test_flushes_that_work_again_say_how_many_failed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        caplog.at_level("INFO", logger="thinwire"),
        disk_fills(tmp_path, frees=True) as (frames, _),
    ):
        pass
    assert frames[-1]["stopReason"] == "end"
    first, again = flush_lines(caplog)
    assert first.levelname == "WARNING" and first.exc_info is not None
    assert again.levelname == "INFO" and again.exc_info is None
    assert again.getMessage().endswith(f"failed {DiskFills.disk.refused} time(s), and works again")
