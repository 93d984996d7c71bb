"""The store conformance suite: every Store implementation must pass all of it."""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from thinwire.records import Checkpoint
from thinwire.stores import (
    AlreadyExists,
    AuditEntry,
    ContextRecord,
    Event,
    MemoryStore,
    SQLiteStore,
    Store,
    StoreError,
    VersionConflict,
)
from thinwire.stores.redis import RedisStore
from thinwire.stores.sqlite import MAX_PARTS
from thinwire.stores.sqlite import store as sqlite_store

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
    base = ContextRecord(
        id=context_id,
        agent="demo",
        owner="user:ada",
        history=[{"role": "system", "content": "be brief"}],
        state={"count": 0, "tags": ["a"], "nested": {"ok": True, "none": None}},
        transcript=[],
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
    loaded = await store.load("ctx-1")
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
    first = await store.load("ctx-1")
    assert first is not None
    first.state["tags"].append("mutated")
    first.history.clear()
    second = await store.load("ctx-1")
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
    await store.close()


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

    def counted(functions: list[Any]) -> Any:
        commits.append(len(functions))
        return commit(functions)

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


async def test_sqlite_reads_and_rewrites_a_record_kept_whole(tmp_path: Path) -> None:
    """Rows written before history and transcript had columns keep both in `data`."""
    path = tmp_path / "t.db"
    turns = [{"role": "user", "text": "hï", "toolCalls": [], "stopReason": None}]
    old = record(transcript=turns, version=3)
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE contexts (id TEXT PRIMARY KEY, agent TEXT NOT NULL, "
            "owner TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL)"
        )
        connection.execute(
            "INSERT INTO contexts VALUES ('ctx-1', 'demo', 'user:ada', 3, ?)",
            (json.dumps(old.to_json()),),
        )
    store = SQLiteStore(path)
    assert await store.load("ctx-1") == old
    view = await store.load_transcript("ctx-1")
    assert view is not None and json.loads(view.turns_json) == turns
    assert await store.save(record(transcript=[*turns, *turns]), expected_version=3) == 4
    view = await store.load_transcript("ctx-1")
    assert view is not None and json.loads(view.turns_json) == [*turns, *turns]
    assert await store.load_transcript("ctx-2") is None
    await store.close()


async def test_load_transcript_is_the_records_public_part(store: Store) -> None:
    turns = [{"role": "user", "text": "é 👋", "toolCalls": [], "stopReason": None}]
    interrupt = {"interruptId": "int-1", "kind": "approval", "message": "ok?"}
    checkpoint = Checkpoint(run_id="run-1", text="x", journal=[], interrupt=interrupt)
    await store.create(record(transcript=turns, checkpoint=checkpoint))
    view = await store.load_transcript("ctx-1")
    assert view is not None
    assert (view.agent, view.owner, view.active_run) == ("demo", "user:ada", None)
    assert json.loads(view.turns_json) == turns and view.pending_interrupt == interrupt
    assert await store.load_transcript("ctx-missing") is None


def test_a_record_at_rest_holds_text_and_decodes_when_used() -> None:
    original = record(
        transcript=[{"role": "user", "text": "é", "toolCalls": [], "stopReason": None}]
    )
    expected = original.to_json()
    original.compact()
    assert original.at_rest and original == record(transcript=expected["transcript"])
    assert json.loads(original.encode()) == expected
    assert json.loads(original.history_json()) == expected["history"]
    original.history.append({"role": "user", "content": "more"})  # decodes, then changes
    assert not original.at_rest
    assert json.loads(original.history_json())[-1] == {"role": "user", "content": "more"}
    broken = record(history=[{"role": "user", "content": math.nan}])
    with pytest.raises(ValueError):
        broken.compact()


async def test_a_loaded_record_decodes_its_history_only_when_used(store: Store) -> None:
    await store.create(record())
    loaded = await store.load("ctx-1")
    assert loaded is not None
    loaded.history.append({"role": "user", "content": "later"})
    loaded.transcript.append({"role": "user", "text": "later", "toolCalls": []})
    loaded.compact()
    assert await store.save(loaded, expected_version=1) == 2
    again = await store.load("ctx-1")
    assert again is not None and again.history[-1]["content"] == "later"
    assert again.transcript[-1]["text"] == "later"


async def test_redis_reads_and_rewrites_a_record_kept_whole(redis_url: str) -> None:
    """Hashes written before history and transcript had fields keep both in `data`."""
    store = RedisStore.from_url(redis_url, prefix=f"test-{secrets.token_hex(4)}")
    turns = [{"role": "user", "text": "hï", "toolCalls": [], "stopReason": None}]
    old = record(transcript=turns, version=3)
    fields = {"agent": "demo", "owner": "user:ada", "version": 3, "data": old.encode()}
    await store.redis.hset(store.key("ctx", "ctx-1"), mapping=fields)
    assert await store.load("ctx-1") == old
    view = await store.load_transcript("ctx-1")
    assert view is not None and json.loads(view.turns_json) == turns
    assert await store.save(record(transcript=[*turns, *turns]), expected_version=3) == 4
    stored = await store.redis.hgetall(store.key("ctx", "ctx-1"))
    assert json.loads(stored["transcript"]) == [*turns, *turns]
    assert "history" not in json.loads(stored["data"])
    await store.close()


def test_appending_to_a_record_at_rest_keeps_it_text() -> None:
    at_rest = record(transcript=[])
    at_rest.compact()
    at_rest.add_turn({"role": "user", "text": "a", "toolCalls": []})
    at_rest.add_turn({"role": "user", "text": "b\\n]", "toolCalls": []})
    at_rest.add_message({"role": "user", "content": "c"})
    assert at_rest.at_rest
    assert [t["text"] for t in json.loads(at_rest.transcript_json())] == ["a", "b\\n]"]
    assert [m["content"] for m in at_rest.history] == ["be brief", "c"]
    at_rest.add_message({"role": "user", "content": "d"})  # decoded now: a list append
    assert json.loads(at_rest.history_json())[-1]["content"] == "d"


def parts_of(path: Path, list_name: str) -> list[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT text FROM parts WHERE context_id = 'ctx-1' AND list = ? ORDER BY seq",
            (list_name,),
        ).fetchall()
    return [text for (text,) in rows]


async def test_sqlite_appends_what_a_save_added_and_rewrites_anything_else(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    await store.create(record())
    loaded = await store.load("ctx-1")
    assert loaded is not None
    for n in range(3):
        loaded.add_turn({"role": "user", "text": f"t{n}", "toolCalls": []})
        loaded.add_message({"role": "user", "content": f"m{n}"})
        loaded.version = await store.save(loaded, expected_version=loaded.version)
    assert parts_of(path, "transcript") == [
        "[",
        '{"role":"user","text":"t0","toolCalls":[]}',
        ',{"role":"user","text":"t1","toolCalls":[]}',
        ',{"role":"user","text":"t2","toolCalls":[]}',
    ]
    assert len(parts_of(path, "history")) == 4
    loaded.history[0]["content"] = "edited in place"  # not an append: rewritten whole
    loaded.version = await store.save(loaded, expected_version=loaded.version)
    assert len(parts_of(path, "history")) == 1 and len(parts_of(path, "transcript")) == 4
    stale = await store.load("ctx-1")
    assert stale is not None
    loaded.add_turn({"role": "user", "text": "lands", "toolCalls": []})
    loaded.version = await store.save(loaded, expected_version=loaded.version)
    stale.add_turn({"role": "user", "text": "refused", "toolCalls": []})
    with pytest.raises(VersionConflict):
        await store.save(stale, expected_version=stale.version)
    await store.close()
    again = await SQLiteStore(path).load("ctx-1")
    assert again is not None and again == loaded
    assert [t["text"] for t in again.transcript] == ["t0", "t1", "t2", "lands"]
    assert again.history[0]["content"] == "edited in place"


async def test_sqlite_rewrites_a_list_of_many_parts_as_one(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteStore(path)
    grown = record()
    await store.create(grown)
    grown.version = 1
    for n in range(MAX_PARTS + 1):
        grown.add_turn({"role": "user", "text": f"t{n}", "toolCalls": []})
        grown.version = await store.save(grown, expected_version=grown.version)
        assert 1 <= len(parts_of(path, "transcript")) <= MAX_PARTS
    assert len(parts_of(path, "transcript")) < MAX_PARTS  # rewritten on the way
    view = await store.load_transcript("ctx-1")
    assert view is not None
    assert [t["text"] for t in json.loads(view.turns_json)] == [
        f"t{n}" for n in range(MAX_PARTS + 1)
    ]
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
    stored = await store.load("ctx-1")
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
