"""The store conformance suite: every Store implementation must pass all of it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import secrets
import socket
import sqlite3
import time
from array import array
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from thinwire.branches import Page, Position
from thinwire.errors import DataFormatTooNew, Misconfigured
from thinwire.records import Checkpoint, json_array
from thinwire.stores import (
    AlreadyExists,
    AuditEntry,
    AuditPage,
    ContextRecord,
    Event,
    MemoryStore,
    RunEvents,
    SQLiteStore,
    Store,
    StoreError,
    VersionConflict,
)
from thinwire.stores.listing import Cursor
from thinwire.stores.redis import FORMAT as REDIS_FORMAT
from thinwire.stores.redis import RedisStore
from thinwire.stores.sqlite import store as sqlite_store
from thinwire.stores.sqlite.database import FORMAT as SQLITE_FORMAT
from thinwire.testing import serve_redis

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    instance: Store
    if request.param == "memory":
        instance = MemoryStore()
    elif request.param == "sqlite":
        instance = SQLiteStore(tmp_path / "t.db")
    else:
        url = request.getfixturevalue("redis_url")
        instance = RedisStore.from_url(url, prefix=f"test-{secrets.token_hex(4)}")
    yield instance
    await instance.close()


def record(context_id: str = "ctx-1", **changes: Any) -> ContextRecord:
    """A record; `history` and `transcript` make its exchanges, as a whole conversation."""
    base = ContextRecord(
        id=context_id,
        agent="demo",
        owner="user:ada",
        history=changes.pop("history", [{"role": "system", "content": "be brief"}]),
        state={"count": 0, "tags": ["a"], "nested": {"ok": True, "none": None}},
        transcript=changes.pop("transcript", []),
        created_at=1.5,
        updated_at=1.5,
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


def entry(key: str, value: Any, source: str = "test") -> AuditEntry:
    return AuditEntry(key=key, value=value, time=2.0, source=source)


async def test_create_then_load_round_trips(store: Store) -> None:
    original = record(transcript=[{"role": "user", "text": "héllo 👋\n", "toolCalls": []}])
    await store.create(original)
    loaded = await store.load_whole("ctx-1")
    assert loaded is not None
    assert loaded.version == 1
    original.version = 1
    assert loaded == original


async def test_load_of_an_unknown_id_is_none(store: Store) -> None:
    assert await store.load("ctx-missing") is None


async def test_create_refuses_an_existing_id(store: Store) -> None:
    await store.create(record())
    with pytest.raises(AlreadyExists):
        await store.create(record(owner="user:mallory"))
    loaded = await store.load("ctx-1")
    assert loaded is not None and loaded.owner == "user:ada"


async def test_loaded_records_are_copies(store: Store) -> None:
    await store.create(record())
    first = await store.load_whole("ctx-1")
    assert first is not None
    first.state["tags"].append("mutated")
    first.preamble.clear()
    second = await store.load_whole("ctx-1")
    assert second is not None
    assert second.state["tags"] == ["a"] and len(second.history) == 1


async def test_save_is_compare_and_set(store: Store) -> None:
    await store.create(record())
    changed = record(state={"count": 1}, last_seq=7)
    assert await store.save(changed, expected_version=1) == 2
    with pytest.raises(VersionConflict) as conflict:
        await store.save(record(state={"count": 99}), expected_version=1)
    assert (conflict.value.expected, conflict.value.actual) == (1, 2)
    loaded = await store.load("ctx-1")
    assert loaded is not None
    assert loaded.version == 2 and loaded.state == {"count": 1} and loaded.last_seq == 7


async def test_save_of_a_missing_record_conflicts(store: Store) -> None:
    with pytest.raises(VersionConflict) as conflict:
        await store.save(record(), expected_version=1)
    assert conflict.value.actual is None
    assert await store.load("ctx-1") is None


async def test_concurrent_saves_from_one_version_let_exactly_one_win(store: Store) -> None:
    await store.create(record())
    results = await asyncio.gather(
        *(store.save(record(state={"writer": n}), expected_version=1) for n in range(8)),
        return_exceptions=True,
    )
    winners = [r for r in results if r == 2]
    assert len(winners) == 1
    assert all(isinstance(r, VersionConflict) for r in results if r != 2)
    loaded = await store.load("ctx-1")
    assert loaded is not None and loaded.state["writer"] == results.index(2)


async def test_audit_is_appended_with_the_save_it_belongs_to(store: Store) -> None:
    await store.create(record(), audit=[entry("count", 0, "system")])
    await store.save(record(), expected_version=1, audit=[entry("count", 1, "agent:demo")])
    await store.save(
        record(),
        expected_version=2,
        audit=[entry("count", 2, "operator:anna"), entry("tags", ["b"], "operator:anna")],
    )
    trail = await store.audit("ctx-1")
    assert [(e.key, e.value, e.source, e.version) for e in trail] == [
        ("count", 0, "system", 1),
        ("count", 1, "agent:demo", 2),
        ("count", 2, "operator:anna", 3),
        ("tags", ["b"], "operator:anna", 3),
    ]
    assert [e.value for e in await store.audit("ctx-1", "tags")] == [["b"]]
    assert await store.audit("ctx-other") == []


async def test_the_audit_trail_is_read_a_page_at_a_time(store: Store) -> None:
    """Numbered from 1 across every key, the latest of a page last: a page before an
    entry, or after one, and whether more are on that side."""
    await store.create(record(), audit=[entry("count", 0, "system")])
    await store.save(record(), expected_version=1, audit=[entry("count", 1), entry("tags", ["b"])])
    await store.save(record(), expected_version=2, audit=[entry("count", 2), entry("count", 3)])

    async def page(**where: Any) -> tuple[list[tuple[int, str, Any]], bool]:
        found = await store.audit_page("ctx-1", **where)
        return [(n, e.key, e.value) for n, e in found.entries], found.more

    trail = [(1, "count", 0), (2, "count", 1), (3, "tags", ["b"]), (4, "count", 2), (5, "count", 3)]
    assert await page(limit=2) == (trail[3:], True)
    assert await page(limit=2, before=4) == (trail[1:3], True)
    assert await page(limit=2, before=2) == (trail[:1], False)
    assert await page(limit=10, before=99) == (trail, False)
    assert await page(limit=2, key="count", before=4) == ([trail[0], trail[1]], False)
    assert await page(limit=1, key="tags") == ([trail[2]], False)
    assert await page(limit=2, after=0) == (trail[:2], True)
    assert await page(limit=2, after=3) == (trail[3:], False)
    assert await page(limit=2, key="count", after=1) == ([trail[1], trail[3]], True)
    assert await page(limit=5, after=5) == ([], False)
    whole = await store.audit_page("ctx-1", limit=10)
    assert [e for _, e in whole.entries] == await store.audit("ctx-1")
    assert await store.audit_page("ctx-other", limit=10) == AuditPage([], False)


async def test_a_conflicting_save_appends_no_audit(store: Store) -> None:
    await store.create(record())
    await store.save(record(), expected_version=1)
    with pytest.raises(VersionConflict):
        await store.save(record(), expected_version=1, audit=[entry("count", 5)])
    assert await store.audit("ctx-1") == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1, 2}, b"bytes", object()])
async def test_non_json_values_change_nothing(store: Store, bad: Any) -> None:
    await store.create(record())
    with pytest.raises((TypeError, ValueError)):
        await store.save(record(state={"bad": bad}), expected_version=1)
    with pytest.raises((TypeError, ValueError)):
        await store.save(record(), expected_version=1, audit=[entry("bad", bad)])
    loaded = await store.load("ctx-1")
    assert loaded is not None and loaded.version == 1 and "bad" not in loaded.state
    assert await store.audit("ctx-1") == []


async def test_delete_removes_every_trace(store: Store) -> None:
    await store.create(record(), audit=[entry("count", 0)])
    await store.create(record("ctx-2"), audit=[entry("count", 0)])
    assert await store.delete("ctx-1") is True
    assert await store.load("ctx-1") is None
    assert await store.audit("ctx-1") == []
    assert await store.delete("ctx-1") is False
    assert await store.load("ctx-2") is not None
    assert len(await store.audit("ctx-2")) == 1


def event(seq: int, run_id: str = "run-1", time: float = 100.0) -> Event:
    return Event(seq=seq, run_id=run_id, data=f'{{"seq":{seq},"text":"é\\n"}}', time=time)


async def test_events_are_kept_once_in_seq_order(store: Store) -> None:
    await store.create(record())
    await store.append_events("ctx-1", [event(2), event(1)])
    await store.append_events("ctx-1", [event(2), event(3)])  # a retried flush
    assert await store.read_events("ctx-1") == [event(1), event(2), event(3)]
    assert [e.seq for e in await store.read_events("ctx-1", after=2)] == [3]
    assert await store.read_events("ctx-other") == []


async def test_a_save_lands_its_events_with_it(store: Store) -> None:
    await store.create(record())
    await store.save(record(), expected_version=1, events=[event(1), event(2)])
    with pytest.raises(VersionConflict):
        await store.save(record(), expected_version=1, events=[event(3)])
    assert [e.seq for e in await store.read_events("ctx-1")] == [1, 2]


def run_events(seqs: Sequence[int], time: float = 100.0) -> RunEvents:
    return RunEvents(array("q", seqs), [event(n).data for n in seqs], "run-1", time)


async def test_a_runs_frames_land_as_the_events_they_stand_for(store: Store) -> None:
    frames = run_events(range(1, 201))
    assert list(frames) == [event(n) for n in range(1, 201)]
    assert frames[-1] == event(200) and list(frames[1:3]) == [event(2), event(3)]
    await store.create(record())
    await store.save(record(), expected_version=1, events=frames)
    await store.append_events("ctx-1", run_events(range(150, 206)))  # a retried flush
    await store.append_events("ctx-1", run_events([207, 206], time=100.0))  # out of order
    assert await store.read_events("ctx-1") == [event(n) for n in range(1, 208)]


async def test_events_are_trimmed_and_expired(store: Store) -> None:
    await store.create(record())
    await store.create(record("ctx-2"))
    await store.append_events("ctx-1", [event(n, time=100.0 + n) for n in range(1, 6)])
    await store.append_events("ctx-2", [event(1, time=50.0)])
    await store.trim_events("ctx-1", before_seq=3)
    assert [e.seq for e in await store.read_events("ctx-1")] == [3, 4, 5]
    if isinstance(store, RedisStore):  # each log expires by itself, a TTL after its last frame
        assert 0 < await store.redis.ttl(store.key("events", "ctx-1")) <= store.event_ttl
        return
    assert await store.expire_events(before_time=104.5) == 3
    assert [e.seq for e in await store.read_events("ctx-1")] == [5]
    assert await store.read_events("ctx-2") == []


async def test_delete_removes_events_too(store: Store) -> None:
    await store.create(record())
    await store.append_events("ctx-1", [event(1)])
    await store.delete("ctx-1")
    assert await store.read_events("ctx-1") == []


async def test_follow_events_waits_for_the_next_frame(store: Store) -> None:
    await store.create(record())
    await store.append_events("ctx-1", [event(1)])
    assert [e.seq for e in await store.follow_events("ctx-1", 0, timeout=1)] == [1]
    assert await store.follow_events("ctx-1", 1, timeout=0.1) == []

    async def later() -> None:
        await asyncio.sleep(0.1)
        await store.append_events("ctx-1", [event(2)])

    writer = asyncio.create_task(later())
    assert [e.seq for e in await store.follow_events("ctx-1", 1, timeout=5)] == [2]
    await writer


# --- SQLite only: durability and atomicity on disk ------------------------------------


async def test_sqlite_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "data" / "t.db"
    first = SQLiteStore(path)
    await first.create(record(), audit=[entry("count", 0)])
    await first.save(record(state={"count": 3}), expected_version=1)
    await first.close()
    second = SQLiteStore(path)
    loaded = await second.load("ctx-1")
    assert loaded is not None and loaded.version == 2 and loaded.state == {"count": 3}
    assert len(await second.audit("ctx-1")) == 1
    await second.close()


async def test_sqlite_a_lost_exchange_leaves_the_rest_readable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await saved(store, conversation(turns=4))
    await store.close()
    with sqlite3.connect(tmp_path / "t.db") as connection:
        connection.execute("DELETE FROM exchanges WHERE depth = 2")
    store = SQLiteStore(tmp_path / "t.db")
    view = await store.load_transcript("ctx-1")
    await store.close()
    assert view is not None
    assert [t["text"] for t in json.loads(json_array(view.turns))] == [
        "q0",
        "a0",
        "q1",
        "a1",
        "q3",
        "a3",
    ]
    assert "exchanges missing from the store: [Position(line=0, depth=2)]" in caplog.text


async def test_sqlite_uses_wal(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(record())
    await store.close()
    with sqlite3.connect(tmp_path / "t.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_sqlite_failure_mid_save_leaves_the_old_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(record())

    def fail(*args: object) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    # The record row is already updated inside the transaction when the audit fails.
    fail_audit: Callable[..., None] = fail
    monkeypatch.setattr(sqlite_store, "append_audit", fail_audit)
    with pytest.raises(StoreError) as failed:  # the driver's error, mapped at the store
        await store.save(record(state={"count": 1}), expected_version=1, audit=[entry("count", 1)])
    assert isinstance(failed.value.__cause__, sqlite3.OperationalError)
    assert (failed.value.status, failed.value.code) == (503, "store_unavailable")
    monkeypatch.undo()
    loaded = await store.load("ctx-1")
    assert loaded is not None and loaded.version == 1 and loaded.state["count"] == 0
    assert await store.save(record(state={"count": 2}), expected_version=1) == 2
    await store.close()


async def test_a_save_can_trim_old_events_in_the_same_step(store: Store) -> None:
    await store.create(record())
    await store.append_events("ctx-1", [event(n) for n in range(1, 6)])
    await store.save(record(), expected_version=1, events=[event(6)], trim_before=4)
    assert [e.seq for e in await store.read_events("ctx-1")] == [4, 5, 6]
    with pytest.raises(VersionConflict):  # a refused save trims nothing
        await store.save(record(), expected_version=1, trim_before=6)
    assert [e.seq for e in await store.read_events("ctx-1")] == [4, 5, 6]


async def test_sqlite_keeps_a_flush_as_one_span_and_cuts_spans_exactly(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(record())
    flush = [event(n, time=7.0) for n in range(1, 201)]
    mixed = [event(201, time=8.0), event(202, "run-2", time=8.0), event(204, "run-2", time=8.0)]
    await store.append_events("ctx-1", [*flush, *mixed])
    await store.close()
    with sqlite3.connect(tmp_path / "t.db") as connection:
        rows = connection.execute("SELECT first_seq, last_seq FROM spans ORDER BY 1").fetchall()
    assert rows == [(1, 200), (201, 201), (202, 202), (204, 204)]
    store = SQLiteStore(tmp_path / "t.db")
    await store.trim_events("ctx-1", before_seq=150)  # cuts inside the first span
    assert [e.seq for e in await store.read_events("ctx-1")] == [*range(150, 203), 204]
    # A retried flush over kept frames adds only the missing ones: 203 and 205.
    await store.append_events("ctx-1", [event(n, time=9.0) for n in range(150, 206)])
    kept = await store.read_events("ctx-1", after=149)
    assert [e.seq for e in kept] == list(range(150, 206))
    assert kept[0] == event(150, time=7.0) and kept[-1] == event(205, time=9.0)
    assert kept[52:55] == [event(202, "run-2", 8.0), event(203, time=9.0), event(204, "run-2", 8.0)]
    # A run's frames handed over as they are in its log make one span too.
    await store.append_events("ctx-1", run_events(range(206, 406), time=10.0))
    await store.close()
    with sqlite3.connect(tmp_path / "t.db") as connection:
        rows = connection.execute("SELECT first_seq, last_seq FROM spans ORDER BY 1").fetchall()
    assert rows[-1] == (206, 405) and rows[-2][1] == 205


async def test_sqlite_refuses_a_frame_that_is_not_json(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(record())
    with pytest.raises(ValueError, match="not JSON"):
        await store.append_events("ctx-1", [Event(1, "run-1", '{"a":"\x1e"}', 1.0)])
    assert await store.read_events("ctx-1") == []
    await store.close()


async def test_sqlite_moves_a_file_with_one_row_per_frame_over(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "CREATE TABLE events (context_id TEXT NOT NULL, seq INTEGER NOT NULL, "
            "run_id TEXT NOT NULL, data TEXT NOT NULL, time REAL NOT NULL, "
            "PRIMARY KEY (context_id, seq)) WITHOUT ROWID;"
        )
        connection.executemany(
            "INSERT INTO events VALUES ('ctx-1', ?, 'run-1', ?, 100.0)",
            [(e.seq, e.data) for e in (event(1), event(2))],
        )
    store = SQLiteStore(path)
    assert await store.read_events("ctx-1") == [event(1), event(2)]
    await store.close()
    with sqlite3.connect(path) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    assert "events" not in tables


async def test_sqlite_writes_that_arrive_together_share_a_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await asyncio.gather(*(store.create(record(f"ctx-{n}")) for n in range(50)))
    commits: list[int] = []
    commit = store._database._commit

    def counted(functions: list[Any], fsync: bool) -> Any:
        commits.append(len(functions))
        return commit(functions, fsync)

    monkeypatch.setattr(store._database, "_commit", counted)
    saves = [
        store.save(record(f"ctx-{n}", state={"n": n}), expected_version=1, audit=[entry("n", n)])
        for n in range(50)
    ]
    stale = store.save(record("ctx-7", state={"n": -1}), expected_version=1, audit=[entry("n", -1)])
    outcomes = await asyncio.gather(*saves[:25], stale, *saves[25:], return_exceptions=True)
    assert sum(commits) == 51 and len(commits) < 51  # some shared a commit
    assert isinstance(outcomes[25], VersionConflict)  # failed alone, in the middle of a group
    assert [o for o in outcomes if not isinstance(o, Exception)] == [2] * 50
    await store.close()
    reopened = SQLiteStore(tmp_path / "t.db")
    for n in range(50):
        loaded = await reopened.load(f"ctx-{n}")
        assert loaded is not None and loaded.state == {"n": n}
    assert [e.value for e in await reopened.audit("ctx-7")] == [7]
    await reopened.close()


async def test_sqlite_fsyncs_every_commit_but_one_of_only_a_running_replys_frames(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "t.db")

    async def synchronous() -> int:  # 2: FULL (fsync at every commit), 1: NORMAL
        value: int = await store._database.read(
            lambda c: c.execute("PRAGMA synchronous").fetchone()[0]
        )
        return value

    await store.create(record("ctx-1"))
    assert await synchronous() == 2
    await store.append_events("ctx-1", [event(1), event(2)])
    assert await synchronous() == 1
    await store.append_events("ctx-1", [event(3)])
    await store.save(record("ctx-1", state={"n": 1}), expected_version=1)
    assert await synchronous() == 2  # a save fsyncs, and makes the frames before it durable
    await store.close()
    reopened = SQLiteStore(tmp_path / "t.db")
    assert await reopened.read_events("ctx-1") == [event(1), event(2), event(3)]
    await reopened.close()


async def test_sqlite_a_failed_commit_acknowledges_none_of_its_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(record())
    await store.create(record("ctx-2"))
    database = store._database
    database._connect = fail_commits(database._connect)  # type: ignore[method-assign]
    outcomes = await asyncio.gather(
        store.save(record(state={"count": 1}), expected_version=1),
        store.save(record("ctx-2", state={"count": 1}), expected_version=1),
        return_exceptions=True,
    )
    assert all(isinstance(o, StoreError) for o in outcomes)
    assert all(isinstance(o.__cause__, sqlite3.OperationalError) for o in outcomes)
    for context_id in ("ctx-1", "ctx-2"):
        loaded = await store.load(context_id)
        assert loaded is not None and loaded.version == 1 and loaded.state["count"] == 0
    await store.close()


def fail_commits(connect: Callable[[], sqlite3.Connection]) -> Callable[[], Any]:
    """A connection whose COMMIT fails like a full disk; everything else goes through."""

    class Failing:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self.connection = connection

        def execute(self, sql: str, *args: Any) -> Any:
            if sql == "COMMIT":
                raise sqlite3.OperationalError("database or disk is full")
            return self.connection.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.connection, name)

    return lambda: Failing(connect())


# --- exchanges, branches and lists: every store ---------------------------------------


def conversation(context_id: str = "ctx-1", turns: int = 3, **changes: Any) -> ContextRecord:
    """A record as runs leave it: `turns` exchanges of a user message and a reply."""
    made = record(context_id, **changes)
    for n in range(turns):
        reply(made, f"q{n}", f"a{n}")
    return made


def reply(made: ContextRecord, asked: str, answer: str, fork: Position | None = None) -> None:
    made.start_run(f"run-{asked}", asked, fork=fork)
    made.end_turn("end", answer)


async def saved(store: Store, made: ContextRecord) -> None:
    """Store it, as the registry does: created or saved, then marked saved."""
    if made.version == 0:
        await store.create(made)
        made.version = 1
    else:
        made.version = await store.save(made, expected_version=made.version)
    made.saved()


async def test_a_conversation_round_trips_through_its_exchanges(store: Store) -> None:
    made = conversation(turns=4)
    await saved(store, made)
    bare = await store.load("ctx-1")
    assert bare is not None and bare.exchanges == {}  # the record alone
    loaded = await store.load_whole("ctx-1")
    assert loaded is not None
    # Held as text, decoded only as far as a read goes (from the end, as a model reads).
    assert loaded.history[-1]["content"] == "a3"
    decoded = [p.depth for p, e in loaded.exchanges.items() if e._messages is not None]
    assert decoded == [3]
    assert loaded == made and loaded.transcript == made.transcript
    assert [m["content"] for m in loaded.history][-2:] == ["q3", "a3"]


async def test_a_save_writes_the_exchanges_that_changed_and_no_other(store: Store) -> None:
    made = conversation(turns=2)
    await saved(store, made)
    loaded = await store.load_whole("ctx-1")
    assert loaded is not None
    # An exchange changed behind the record's back is not written: only what the verbs
    # (and the running exchange) touched is.
    loaded.exchanges[Position(0, 0)].messages[0]["content"] = "not written"
    reply(loaded, "q2", "a2")
    await saved(store, loaded)
    again = await store.load_whole("ctx-1")
    assert again is not None
    assert [m["content"] for m in again.history] == ["be brief", "q0", "a0", "q1", "a1", "q2", "a2"]


async def test_branches_keep_every_exchange_and_show_one(store: Store) -> None:
    made = conversation(turns=3)
    await saved(store, made)
    reply(made, "q2", "a2 again", fork=Position(0, 2))  # a regenerated last reply
    reply(made, "q3", "a3")
    reply(made, "q1 edited", "a1'", fork=Position(0, 1))  # an edit of an earlier message
    await saved(store, made)
    loaded = await store.load_whole("ctx-1")
    assert loaded is not None and loaded.transcript == made.transcript
    view = await store.load_transcript("ctx-1")  # a cold read: the turns alone
    assert view is not None and json.loads(json_array(view.turns)) == made.transcript
    texts = [t["text"] for t in loaded.transcript]
    assert texts == ["q0", "a0", "q1 edited", "a1'"]
    assert [(t["siblings"], t["siblingIndex"]) for t in loaded.transcript][2] == (2, 1)
    # The history of the branch shown: never the turns of another branch.
    assert [m["content"] for m in loaded.history] == ["be brief", "q0", "a0", "q1 edited", "a1'"]
    loaded.show(Position(1, 2))  # back to the regenerated branch: exchanges not in hand
    await store.load_branch(loaded)
    assert [t["text"] for t in loaded.transcript] == [
        "q0",
        "a0",
        "q1",
        "a1",
        "q2",
        "a2 again",
        "q3",
        "a3",
    ]
    assert [(t["siblings"], t["siblingIndex"]) for t in loaded.transcript][4] == (2, 1)
    # Read cold, branch by branch: the turns of an exchange with siblings are marked
    # wherever it is on its line (at a line's end, start or middle).
    for leaf in (Position(1, 3), Position(0, 2), Position(2, 1)):
        loaded.show(leaf)
        await store.load_branch(loaded)
        await saved(store, loaded)
        view = await store.load_transcript("ctx-1")
        assert view is not None and json.loads(json_array(view.turns)) == loaded.transcript
    assert [t["siblings"] for t in loaded.transcript] == [1, 1, 2, 2]
    others = await store.load_exchanges("ctx-1", [Position(0, 2), Position(9, 9)])
    assert [e.position for e in others] == [Position(0, 2)]  # what there is, no more


async def test_a_cold_read_pages_any_branch_from_its_end(store: Store) -> None:
    made = conversation(turns=5)
    reply(made, "q3'", "a3'", fork=Position(0, 3))
    reply(made, "q4", "a4")
    reply(made, "q5", "a5")
    reply(made, "q1'", "a1'", fork=Position(0, 1))
    made.show(Position(1, 5))
    await saved(store, made)
    whole = made.transcript
    assert [t["text"] for t in whole[::2]] == ["q0", "q1", "q2", "q3'", "q4", "q5"]
    for limit in range(1, 8):
        view = await store.load_transcript("ctx-1", Page(limit))
        assert view is not None and view.turns is not None
        assert json.loads(json_array(view.turns)) == whole[-2 * limit :]
        assert view.has_earlier == (limit < 6)
        # Before an exchange: those leading to it, on its own branch (shown or not).
        for before, ancestors in (
            (Position(1, 5), ["q0", "q1", "q2", "q3'", "q4"]),
            (Position(1, 3), ["q0", "q1", "q2"]),
            (Position(0, 4), ["q0", "q1", "q2", "q3"]),
            (Position(2, 1), ["q0"]),
            (Position(0, 0), []),
        ):
            view = await store.load_transcript("ctx-1", Page(limit, before))
            assert view is not None and view.turns is not None
            turns = json.loads(json_array(view.turns))
            assert [t["text"] for t in turns[::2]] == ancestors[-limit:]
            assert view.has_earlier == (len(ancestors) > limit)
    # Siblings are told as on the page's own branch, not the one shown.
    for before, last in ((Position(1, 4), ("q3'", 2, 1)), (Position(0, 4), ("q3", 2, 0))):
        marked = await store.load_transcript("ctx-1", Page(2, before))
        assert marked is not None and marked.turns is not None
        pair = json.loads(json_array(marked.turns))
        assert [(t["text"], t["siblings"], t["siblingIndex"]) for t in pair[::2]] == [
            ("q2", 1, 0),
            last,
        ]
    for unknown in (Position(7, 0), Position(0, 9)):  # no such exchange
        view = await store.load_transcript("ctx-1", Page(2, unknown))
        assert view is not None and view.turns is None


async def test_a_clear_drops_every_exchange(store: Store) -> None:
    made = conversation(turns=2)
    await saved(store, made)
    before = {turn["id"] for turn in made.transcript}
    made.clear()
    await saved(store, made)
    assert await store.load_exchanges("ctx-1", [Position(0, 0), Position(0, 1)]) == []
    loaded = await store.load_whole("ctx-1")
    assert loaded is not None and list(loaded.history) == [
        {"role": "system", "content": "be brief"}
    ]
    reply(loaded, "fresh", "start")
    await saved(store, loaded)
    again = await store.load_whole("ctx-1")
    assert again is not None and [t["text"] for t in again.transcript] == ["fresh", "start"]
    # A turn id names one turn for the life of the conversation: none is given again.
    assert not before & {turn["id"] for turn in again.transcript}


async def test_lists_page_an_owners_conversations_newest_first(store: Store) -> None:
    times = [5.0, 3.0, 9.0, 3.0, 7.0, 3.0, 1.0]  # ties on 3.0: ordered by id
    for n, at in enumerate(times):
        await saved(store, conversation(f"ctx-{n}", turns=1, updated_at=at))
    await saved(store, conversation("ctx-other-owner", turns=1, owner="user:bob", updated_at=8))
    await saved(store, conversation("ctx-other-agent", turns=1, agent="other", updated_at=8))
    pages, after = [], None
    while True:
        page = await store.list_contexts("user:ada", "demo", 3, after)
        pages.append([s.context_id for s in page])
        if len(page) < 3:
            break
        after = Cursor(page[-1].updated_at, page[-1].context_id)
    assert pages == [["ctx-2", "ctx-4", "ctx-0"], ["ctx-5", "ctx-3", "ctx-1"], ["ctx-6"]]
    first = (await store.list_contexts("user:ada", "demo", 1))[0]
    assert (first.title, first.turn_count, first.preview, first.status) == ("q0", 2, "a0", "idle")
    assert first.created_at == 1.5 and first.updated_at == 9.0
    # A save moves a conversation up; a delete takes it out.
    moved = await store.load_whole("ctx-6")
    assert moved is not None
    moved.updated_at = 10.0
    moved.start_run("run-x", "still there?")
    await saved(store, moved)
    top = (await store.list_contexts("user:ada", "demo", 1))[0]
    assert (top.context_id, top.status, top.turn_count, top.preview) == (
        "ctx-6",
        "running",
        3,
        "still there?",
    )
    await store.delete("ctx-2")
    listed = [s.context_id for s in await store.list_contexts("user:ada", "demo", 100)]
    assert "ctx-2" not in listed and len(listed) == 6
    assert await store.list_contexts("user:nobody", "demo", 10) == []


async def test_lists_keep_owners_apart_whatever_their_names(store: Store) -> None:
    await saved(store, conversation("ctx-1", turns=1, owner="a:b", agent="c"))
    await saved(store, conversation("ctx-2", turns=1, owner="a", agent="b:c"))
    assert [s.context_id for s in await store.list_contexts("a:b", "c", 10)] == ["ctx-1"]
    assert [s.context_id for s in await store.list_contexts("a", "b:c", 10)] == ["ctx-2"]


async def test_load_transcript_is_the_records_public_part(store: Store) -> None:
    interrupt = {"interruptId": "int-1", "kind": "approval", "message": "ok?"}
    checkpoint = Checkpoint(run_id="run-1", text="x", journal=[], interrupt=interrupt)
    made = conversation(turns=2, checkpoint=checkpoint)
    made.name("Named", "user")
    await saved(store, made)
    view = await store.load_transcript("ctx-1")
    assert view is not None
    assert (view.agent, view.owner, view.active_run, view.title) == (
        "demo",
        "user:ada",
        None,
        "Named",
    )
    assert json.loads(json_array(view.turns)) == made.transcript
    assert view.pending_interrupt == interrupt
    assert await store.load_transcript("ctx-missing") is None


# --- conversations kept whole by earlier versions --------------------------------------

OLD_HISTORY = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hï"},
    {"role": "assistant", "content": "hello", "stopReason": "end"},
    {"role": "user", "content": "again"},
    {"role": "tool", "name": "t", "arguments": {}, "ok": True, "output": 1},
    {"role": "assistant", "content": "done", "stopReason": "end"},
]
OLD_TURNS = [
    {"role": "user", "text": "hï", "toolCalls": [], "stopReason": None},
    {"role": "assistant", "text": "hello", "toolCalls": [], "stopReason": "end"},
    {"role": "user", "text": "again", "toolCalls": [], "stopReason": None},
    {"role": "assistant", "text": "done", "toolCalls": ["t"], "stopReason": "end"},
]


def old_data(**extra: Any) -> dict[str, Any]:
    """A record's JSON as the first versions wrote it."""
    return {
        "state": {"count": 0},
        "lastSeq": 4,
        "activeRun": None,
        "createdAt": 1.5,
        "updatedAt": 2.5,
        **extra,
    }


def assert_moved_over(loaded: ContextRecord | None) -> None:
    assert loaded is not None and loaded.version >= 3
    assert list(loaded.history) == OLD_HISTORY
    turns = loaded.transcript
    assert [
        {k: t[k] for k in ("role", "text", "toolCalls", "stopReason")} for t in turns
    ] == OLD_TURNS
    assert [t["id"] for t in turns] == [
        "turn-000000000000-u0",
        "turn-000000000000-a0",
        "turn-000000000001-u0",
        "turn-000000000001-a0",
    ]
    assert loaded.title == "hï" and loaded.turn_count == 4


@pytest.mark.parametrize("layout", ["whole", "columns", "parts"])
async def test_sqlite_moves_every_older_layout_over_on_open(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "t.db"
    history, turns = json.dumps(OLD_HISTORY), json.dumps(OLD_TURNS)
    with sqlite3.connect(path) as connection:
        columns = ", history TEXT, transcript TEXT" if layout == "columns" else ""
        connection.execute(
            "CREATE TABLE contexts (id TEXT PRIMARY KEY, agent TEXT NOT NULL, "
            f"owner TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL{columns})"
        )
        if layout == "whole":
            data = json.dumps(old_data(history=OLD_HISTORY, transcript=OLD_TURNS))
            connection.execute(
                "INSERT INTO contexts VALUES ('ctx-1', 'demo', 'user:ada', 3, ?)", (data,)
            )
        elif layout == "columns":
            connection.execute(
                "INSERT INTO contexts VALUES ('ctx-1', 'demo', 'user:ada', 3, ?, ?, ?)",
                (json.dumps(old_data()), history, turns),
            )
        else:  # appended in parts: "[" + "a" + ",b"…, closed on reading
            connection.execute(
                "INSERT INTO contexts VALUES ('ctx-1', 'demo', 'user:ada', 3, ?)",
                (json.dumps(old_data()),),
            )
            connection.execute(
                "CREATE TABLE parts (context_id TEXT, list TEXT, seq INTEGER, text TEXT)"
            )
            for name, text in (("history", history), ("transcript", turns)):
                connection.executemany(
                    "INSERT INTO parts VALUES ('ctx-1', ?, ?, ?)",
                    [(name, 0, text[:-1][:20]), (name, 1, text[:-1][20:])],
                )
    store = SQLiteStore(path)
    assert_moved_over(await store.load_whole("ctx-1"))
    [listed] = await store.list_contexts("user:ada", "demo", 10)
    assert (listed.context_id, listed.turn_count, listed.updated_at) == ("ctx-1", 4, 2.5)
    await store.close()
    with sqlite3.connect(path) as connection:
        names = {row[1] for row in connection.execute("PRAGMA table_info(contexts)")}
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    assert not {"history", "transcript"} & names and "parts" not in tables
    assert user_version(path) == SQLITE_FORMAT  # moved over into this format
    reopened = SQLiteStore(path)  # moved once: opening again changes nothing
    assert_moved_over(await reopened.load_whole("ctx-1"))
    await reopened.close()


async def test_redis_moves_conversations_kept_whole_over_on_open(redis_url: str) -> None:
    store = RedisStore.from_url(redis_url, prefix=f"test-{secrets.token_hex(4)}")
    fields = {
        "agent": "demo",
        "owner": "user:ada",
        "version": 3,
        "data": json.dumps(old_data()),
        "history": json.dumps(OLD_HISTORY),
        "transcript": json.dumps(OLD_TURNS),
    }
    await store.redis.hset(store.key("ctx", "ctx-1"), mapping=fields)
    assert_moved_over(await store.load_whole("ctx-1"))  # readable before it is moved
    await store.open()
    stored = await store.redis.hgetall(store.key("ctx", "ctx-1"))
    assert "history" not in stored and "transcript" not in stored and stored["version"] == "4"
    assert_moved_over(await store.load_whole("ctx-1"))
    [listed] = await store.list_contexts("user:ada", "demo", 10)
    assert listed.context_id == "ctx-1" and listed.turn_count == 4
    await store.open()  # nothing left to move
    assert (await store.redis.hget(store.key("ctx", "ctx-1"), "version")) == "4"
    await store.close()


# --- data formats: an older release's data is stamped, a newer release's refused ------


def user_version(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        version: int = connection.execute("PRAGMA user_version").fetchone()[0]
    return version


def stamp(path: Path, version: int) -> None:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute(f"PRAGMA user_version = {version}")


def dump(path: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(path)) as connection:
        return list(connection.iterdump())


async def test_sqlite_stamps_a_new_file_with_its_data_format(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await store.open()
    await store.create(record())
    await store.close()
    assert user_version(tmp_path / "t.db") == SQLITE_FORMAT >= 1


async def test_sqlite_stamps_an_unstamped_file_and_keeps_its_data(tmp_path: Path) -> None:
    """A file of a release before formats were stamped has this format's schema."""
    path = tmp_path / "t.db"
    older = SQLiteStore(path)
    await older.create(record(), audit=[entry("count", 0)])
    await older.save(record(state={"count": 3}), expected_version=1, events=[event(1)])
    await older.close()
    stamp(path, 0)
    store = SQLiteStore(path)
    await store.open()
    loaded = await store.load_whole("ctx-1")
    assert loaded is not None and loaded.version == 2 and loaded.state == {"count": 3}
    assert len(await store.audit("ctx-1")) == 1
    assert await store.read_events("ctx-1") == [event(1)]
    await store.close()
    assert user_version(path) == SQLITE_FORMAT


async def test_sqlite_refuses_a_file_of_a_newer_format_and_leaves_it_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    newer = SQLiteStore(path)
    await newer.create(record(state={"count": 7}))
    await newer.close()
    stamp(path, SQLITE_FORMAT + 1)
    before = dump(path)
    store = SQLiteStore(path)
    with pytest.raises(DataFormatTooNew) as refused:
        await store.open()
    with pytest.raises(DataFormatTooNew):  # nor is it read
        await store.load("ctx-1")
    await store.close()
    assert (refused.value.found, refused.value.known) == (SQLITE_FORMAT + 1, SQLITE_FORMAT)
    assert isinstance(refused.value, Misconfigured)  # startup says it in one line
    assert str(refused.value) == (
        f"{path} holds data format {SQLITE_FORMAT + 1}, written by a newer thinwire; this "
        f"release reads up to format {SQLITE_FORMAT}: upgrade thinwire, or restore a backup "
        "taken before the newer release opened it"
    )
    assert user_version(path) == SQLITE_FORMAT + 1
    assert dump(path) == before


async def test_redis_stamps_new_and_unstamped_data_with_its_format(redis_url: str) -> None:
    empty = RedisStore.from_url(redis_url, prefix=f"test-{secrets.token_hex(4)}")
    await empty.open()
    assert await empty.redis.get(f"{empty.prefix}:format") == str(REDIS_FORMAT)
    await empty.close()
    # Data of a release before formats were stamped: this format's keys, and no stamp.
    older = RedisStore.from_url(redis_url, prefix=f"test-{secrets.token_hex(4)}")
    await older.create(record(), audit=[entry("count", 0)])
    await older.save(record(state={"count": 3}), expected_version=1, events=[event(1)])
    assert await older.redis.get(f"{older.prefix}:format") is None
    await older.open()
    assert await older.redis.get(f"{older.prefix}:format") == str(REDIS_FORMAT)
    loaded = await older.load_whole("ctx-1")
    assert loaded is not None and loaded.version == 2 and loaded.state == {"count": 3}
    assert len(await older.audit("ctx-1")) == 1
    assert await older.read_events("ctx-1") == [event(1)]
    await older.close()


async def test_redis_refuses_data_of_a_newer_format_and_leaves_it_as_it_is(
    redis_url: str,
) -> None:
    store = RedisStore.from_url(redis_url, prefix=f"test-{secrets.token_hex(4)}")
    await store.create(record(state={"count": 7}))
    await store.redis.set(f"{store.prefix}:format", REDIS_FORMAT + 1)

    async def held() -> dict[str, Any]:
        keys = sorted([key async for key in store.redis.scan_iter(match=f"{store.prefix}:*")])
        return {key: await store.redis.dump(key) for key in keys}

    before = await held()
    with pytest.raises(DataFormatTooNew) as refused:
        await store.open()
    assert (refused.value.found, refused.value.known) == (REDIS_FORMAT + 1, REDIS_FORMAT)
    assert str(refused.value).startswith(
        f"{store.describe()} holds data format {REDIS_FORMAT + 1}, written by a newer thinwire"
    )
    assert await held() == before
    await store.close()


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs, mounted for the test (root only; skipped where mounting is not
    permitted)."""
    import subprocess

    volume = tmp_path / "small"
    volume.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(volume)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield volume
    finally:
        subprocess.run(["umount", "-l", str(volume)], check=False)


async def test_sqlite_recovers_from_a_full_disk_once_space_is_freed(small_volume: Path) -> None:
    store = SQLiteStore(small_volume / "t.db")
    filler = small_volume / "filler"
    filler.write_bytes(b"x" * 1_500_000)
    growing = record(history=[])
    await store.create(growing)
    version = 1
    with pytest.raises(StoreError) as full:
        for _ in range(200):
            growing.history = [*growing.history, {"role": "user", "content": "y" * 50_000}]
            version = await store.save(growing, expected_version=version)
    assert full.value.code == "store_unavailable" and "disk" not in full.value.message
    filler.unlink()
    stored = await store.load_whole("ctx-1")
    assert stored is not None and stored.version == version  # the failed save left nothing
    stored.history = stored.history[:1]
    assert await store.save(stored, expected_version=version) == version + 1
    await store.close()


async def test_sqlite_recovers_when_even_the_rollback_of_a_failed_commit_fails(
    tmp_path: Path,
) -> None:
    """A full disk can fail the rollback too; the connection must not stay stuck in the
    transaction, or every later write fails until a restart."""
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(record())
    database = store._database
    failing = {"COMMIT", "ROLLBACK"}
    connect = database._connect

    class Failing:
        def __init__(self, connection: sqlite3.Connection) -> None:
            self.connection = connection

        def execute(self, sql: str, *args: Any) -> Any:
            if sql in failing:
                raise sqlite3.OperationalError("database or disk is full")
            return self.connection.execute(sql, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.connection, name)

    database._connect = lambda: Failing(connect())  # type: ignore[assignment,method-assign,return-value]
    with pytest.raises(StoreError):
        await store.save(record(state={"count": 1}), expected_version=1)
    failing.clear()  # the space is freed
    assert await store.save(record(state={"count": 2}), expected_version=1) == 2
    await store.close()


async def test_a_created_contexts_first_send_is_found_by_its_owner(store: Store) -> None:
    await store.create(record(sends={"msg-00000001": "run-1"}))
    assert await store.find_send("user:ada", "msg-00000001") == "ctx-1"
    assert await store.find_send("user:mallory", "msg-00000001") is None  # another owner
    assert await store.find_send("user:ada", "msg-00000002") is None
    # Later sends are remembered by the record, not indexed.
    await store.save(record(sends={"msg-00000001": "run-1", "m2": "run-2"}), expected_version=1)
    assert await store.find_send("user:ada", "m2") is None
    loaded = await store.load("ctx-1")
    assert loaded is not None and loaded.sends == {"msg-00000001": "run-1", "m2": "run-2"}
    await store.delete("ctx-1")
    assert await store.find_send("user:ada", "msg-00000001") is None


async def traces(store: Store) -> list[str]:
    """What the store still holds, by name: its Redis keys, the memory store's entries, or
    the SQLite tables with rows."""
    if isinstance(store, RedisStore):
        return sorted([key async for key in store.redis.scan_iter(match=store.key("*", "*"))])
    if isinstance(store, MemoryStore):
        return [name for name, kept in vars(store).items() if any(kept.values())]
    assert isinstance(store, SQLiteStore)
    with sqlite3.connect(store.path) as connection:
        tables = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
        names = [name for (name,) in tables.fetchall()]
        return [name for name in names if connection.execute(f"SELECT 1 FROM {name}").fetchone()]


async def test_delete_leaves_nothing_behind(store: Store) -> None:
    # The first send is indexed, and then forgotten by the record: a hundred sends later.
    await store.create(record(sends={"msg-first": "run-1"}), audit=[entry("count", 0)])
    await store.save(record(sends={"msg-later": "run-2"}), expected_version=1, events=[event(1)])
    assert await traces(store) != []
    assert await store.delete("ctx-1") is True
    assert await traces(store) == []


async def test_delete_leaves_a_send_that_names_another_context(store: Store) -> None:
    # A send key a shared store forgot (after `event_ttl`) is made again by a later
    # conversation's first send of the same message id.
    await store.create(record(sends={"msg-1": "run-1"}))
    await store.create(record("ctx-2", sends={"msg-1": "run-2"}))
    await store.delete("ctx-1")
    assert await store.find_send("user:ada", "msg-1") == "ctx-2"


async def test_redis_delete_finds_the_sends_of_a_context_an_earlier_version_created(
    redis_url: str,
) -> None:
    store = RedisStore.from_url(redis_url, prefix=f"test-{secrets.token_hex(4)}")
    await store.create(record(sends={"msg-1": "run-1"}))
    await store.redis.hdel(store.key("ctx", "ctx-1"), "sends")  # not kept before
    assert await store.delete("ctx-1") is True
    assert await traces(store) == []
    await store.close()


def private(context_id: str = "ctx-1") -> ContextRecord:
    """A conversation with `8d41` in its system prompt, AgentState, history and
    transcript; `save_private` adds it to an audit entry and a frame."""
    made = record(
        context_id,
        history=[{"role": "system", "content": "zq-prompt-8d41"}],
        state={"note": "zq-state-8d41"},
    )
    reply(made, "zq-user-8d41", "zq-reply-8d41")
    return made


async def save_private(store: SQLiteStore, context_id: str = "ctx-1") -> None:
    await store.create(private(context_id), audit=[entry("note", "zq-state-8d41")])
    frame = Event(seq=1, run_id="run-1", data='{"text":"zq-frame-8d41"}', time=1.0)
    await store.save(private(context_id), expected_version=1, events=[frame])


def files_of(path: Path) -> bytes:
    """The raw bytes of a SQLite file and its WAL, as they are now."""
    files = [path, path.with_name(path.name + "-wal")]
    return b"".join(file.read_bytes() for file in files if file.exists())


async def test_sqlite_zeroes_what_it_deletes_whatever_its_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build without SECURE_DELETE leaves a deleted row's bytes in free space: the
    store turns it on for its own connection."""
    connect = sqlite3.connect

    def as_built_without_secure_delete(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = connect(*args, **kwargs)
        connection.execute("PRAGMA secure_delete=OFF")
        return connection

    monkeypatch.setattr(sqlite3, "connect", as_built_without_secure_delete)
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(record("ctx-2"))  # a neighbour: the pages stay in use
    await save_private(store)
    assert b"8d41" in files_of(store.path)
    assert await store.delete("ctx-1") is True
    await store.close()  # the last connection: the WAL is copied in and removed
    assert not store.path.with_name("t.db-wal").exists()
    assert b"8d41" not in store.path.read_bytes()


async def test_sqlite_a_reader_holding_the_wal_delays_its_truncation_not_the_forget(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await save_private(store)
    await store.create(record("ctx-2"))
    reader = sqlite3.connect(store.path, isolation_level=None)  # a backup, say
    try:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM contexts").fetchone() == (2,)
        assert await store.delete("ctx-1") is True  # answered without waiting for it
        assert await store.load("ctx-2") is not None  # and the store goes on serving
        assert b"8d41" in files_of(store.path)  # its snapshot still reads the WAL
        assert "-wal is not truncated: another process reads the file" in caplog.text
        emptying = store._database._emptying
        assert emptying is not None and not emptying.done()
        reader.execute("COMMIT")
    finally:
        reader.close()
    await emptying  # tried again until the reader let go
    assert b"8d41" not in files_of(store.path)
    assert store.path.with_name("t.db-wal").stat().st_size == 0
    await store.close()


def test_store_urls_follow_sqlalchemys_convention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from thinwire.stores import store_from_url

    monkeypatch.chdir(tmp_path)
    relative = store_from_url("sqlite:///data/app.db")
    absolute = store_from_url(f"sqlite:///{tmp_path}/abs.db")  # sqlite:////tmp/…: four slashes
    assert isinstance(relative, SQLiteStore) and relative.path == Path("data/app.db")
    assert isinstance(absolute, SQLiteStore) and absolute.path == tmp_path / "abs.db"
    assert isinstance(store_from_url("memory://"), MemoryStore)
    for bad in ("sqlite://", "sqlite:///", "postgres://x"):
        with pytest.raises(ValueError):
            store_from_url(bad)


async def test_a_redis_urls_timeouts_are_the_clients(redis_url: str) -> None:
    """deploy.md's `socket_timeout=`: a Redis that hangs fails a request after it (twice:
    a command is tried once more on a fresh connection), not after the default 10 s; and
    a silent run is followed all the same, in blocking reads that end inside it."""
    from thinwire.stores import store_from_url

    with socket.socket() as hanging:  # takes connections, answers nothing
        hanging.bind(("127.0.0.1", 0))
        hanging.listen()
        port = hanging.getsockname()[1]
        hung = store_from_url(
            f"redis://127.0.0.1:{port}/0?prefix=p&socket_timeout=0.2&socket_connect_timeout=0.3"
        )
        assert isinstance(hung, RedisStore)
        options = hung.redis.connection_pool.connection_kwargs
        assert (options["socket_timeout"], options["socket_connect_timeout"]) == (0.2, 0.3)
        started = time.monotonic()
        with pytest.raises(StoreError):
            await hung.version("ctx-1")
        assert time.monotonic() - started < 5
        await hung.close()
    live = store_from_url(f"{redis_url}?prefix=t-{secrets.token_hex(4)}&socket_timeout=0.5")
    await live.create(record())
    assert await live.follow_events("ctx-1", 0, timeout=1.5) == []
    await live.close()


async def test_a_sqlite_store_backed_up_while_it_serves_restores_whole(tmp_path: Path) -> None:
    """deploy.md's backup: SQLite's online backup of the live file, writes in its WAL
    included, opens as a store with every conversation."""
    live = SQLiteStore(tmp_path / "live" / "thinwire.sqlite3")
    await live.open()
    await live.create(record("ctx-1", state={"kept": "in the wal"}))
    copy = sqlite3.connect(tmp_path / "backup.sqlite3")
    sqlite3.connect(live.path).backup(copy)
    copy.close()
    await live.close()
    restored = SQLiteStore(tmp_path / "backup.sqlite3")
    await restored.open()
    loaded = await restored.load("ctx-1")
    assert loaded is not None and loaded.state == {"kept": "in the wal"}
    await restored.close()


async def test_one_process_owns_a_sqlite_file(tmp_path: Path) -> None:
    first, second = SQLiteStore(tmp_path / "db"), SQLiteStore(tmp_path / "db")
    await first.open()
    await first.open()  # opening it again is no second owner
    with pytest.raises(Misconfigured, match="one process owns a SQLite store"):
        await second.open()
    await first.close()
    await second.open()  # the first is gone: the file is free
    await second.close()
    other = SQLiteStore(tmp_path / "other")
    await other.open()  # another file is another owner's
    await other.close()


async def test_redis_frames_refused_out_of_memory_fail_the_write_not_silently() -> None:
    """XADD runs in `pcall`, so that a frame appended again is no failure; out of memory
    (`noeviction`), the frame is not stored, and the write must say so."""
    import redis

    with serve_redis() as url:
        control = redis.Redis.from_url(url)
        store = RedisStore.from_url(url, prefix=f"oom-{secrets.token_hex(4)}")
        await store.create(record())
        frame = Event(seq=1, run_id="run-1", data="{}", time=1.0)
        await store.append_events("ctx-1", [frame])
        await store.append_events("ctx-1", [frame])  # again, as a retried write: taken
        control.config_set("maxmemory", 1)
        try:
            later = Event(seq=2, run_id="run-1", data="{}", time=2.0)
            with pytest.raises(StoreError):
                await store.append_events("ctx-1", [later])
            loaded = await store.load("ctx-1")
            assert loaded is not None
            with pytest.raises(StoreError):
                await store.save(loaded, expected_version=loaded.version, events=[later])
        finally:
            control.config_set("maxmemory", 0)
        await store.append_events("ctx-1", [later])
        assert [e.seq for e in await store.read_events("ctx-1", 0)] == [1, 2]
        await store.close()
        control.close()


def test_sqlite_logs_a_repeated_failure_once_in_a_while_with_a_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A full disk fails every commit, 20 a second a run: the log is on that disk too."""
    from thinwire.stores.sqlite.commits import Repeats

    now = [0.0]
    repeats = Repeats(quiet=10.0, clock=lambda: now[0])
    full = sqlite3.OperationalError("database or disk is full")
    with caplog.at_level("WARNING", logger="thinwire.stores"):
        for _ in range(50):
            repeats.log(full)
            now[0] += 0.05
        repeats.log(sqlite3.OperationalError("disk I/O error"))  # another kind: its own line
        now[0] += 10
        repeats.log(full)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "sqlite failed: OperationalError('database or disk is full')",
        "sqlite failed: OperationalError('disk I/O error')",
        "sqlite failed: OperationalError('database or disk is full') "
        "(49 more like it in the last 10 s)",
    ]


def test_the_apps_event_ttl_is_how_long_redis_keeps_frames_and_sends(redis_url: str) -> None:
    """It was the store's own 24 h whatever the app said: a shorter retention, asked for
    privacy, was not kept to."""
    from starlette.testclient import TestClient

    from conftest import app_for, parse_sse
    from thinwire.demo import DemoAgent

    store = RedisStore.from_url(redis_url, prefix=f"ttl-{secrets.token_hex(4)}")
    app = app_for({"demo": lambda: DemoAgent(delay=0)}, store=store, event_ttl=60)
    with TestClient(app) as client:
        body = {"message": {"text": "hi"}, "messageId": "msg-ttl-1"}
        frames = parse_sse(client.post("/agents/demo/runs", json=body).text)
        context_id = frames[0]["contextId"]
        assert client.portal is not None

        async def ttls() -> list[int]:
            keys = [k async for k in store.redis.scan_iter(f"{store.prefix}:send:*")]
            keys.append(store.key("events", context_id))
            return [await store.redis.ttl(key) for key in keys]

        kept = client.portal.call(ttls)
    assert len(kept) == 2 and all(0 < ttl <= 60 for ttl in kept), kept
