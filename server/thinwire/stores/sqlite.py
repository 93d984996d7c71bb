"""The embedded default store: one SQLite file, WAL, every save one transaction.

All database work runs on one dedicated thread, so the event loop never blocks on disk
and the connection is never shared between threads. `synchronous=FULL` makes a
committed save survive power loss, not only a killed process: a save is acknowledged
only once it is durable.

Writes that arrive while a commit is on its way to disk wait and then share the next
one (group commit): one transaction and one fsync for all of them, each in a savepoint
of its own, so a write that fails is rolled back alone and the others still land.
Under load that turns hundreds of fsyncs a second into tens, and no write is
acknowledged before the commit that holds it.

A conversation's history and transcript (JSON arrays, nearly all of a long record) are
kept in `parts`: a save that only added to them appends what it added, not the whole
text again, and a list of many parts is rewritten as one now and then.

Frames are kept as spans, not one row each: a flush of a run's frames is a handful of
consecutive seqs written together, so it becomes one row holding their JSON (an index
entry and a B-tree insert per flush instead of per frame, which was most of a run's
cost here). A span is cut wherever the seqs, the run or the time change, so reads, trims
and expiry stay exact per frame.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any, TypeVar

from thinwire.stores.base import (
    AlreadyExists,
    AuditEntry,
    ContextRecord,
    Event,
    Store,
    StoreError,
    TranscriptView,
    VersionConflict,
    dumps,
)
from thinwire.stores.leases import LocalLeases

__all__ = ["SQLiteStore"]

T = TypeVar("T")
Write = Callable[[sqlite3.Connection], T]

SCHEMA = """
CREATE TABLE IF NOT EXISTS contexts (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    -- The record's JSON without its history and transcript, which are in parts.
    -- Rows written by earlier versions may have them in these two columns, or in data.
    data TEXT NOT NULL,
    history TEXT,
    transcript TEXT
);
CREATE TABLE IF NOT EXISTS parts (
    context_id TEXT NOT NULL,
    list TEXT NOT NULL,  -- 'history' or 'transcript'
    seq INTEGER NOT NULL,
    -- The list's JSON text without its closing bracket is its parts' text in seq order.
    text TEXT NOT NULL,
    PRIMARY KEY (context_id, list, seq)
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    time REAL NOT NULL,
    source TEXT NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_context ON audit (context_id, key, seq);
CREATE TABLE IF NOT EXISTS spans (
    context_id TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    time REAL NOT NULL,
    -- The JSON of frames first_seq..last_seq, joined by SEPARATOR.
    frames TEXT NOT NULL,
    PRIMARY KEY (context_id, last_seq)
);
CREATE INDEX IF NOT EXISTS spans_by_time ON spans (time);
"""

#: A list appended to this many times is rewritten as one part.
MAX_PARTS = 64

#: Joins a span's frames: a control character, which valid JSON never holds unescaped,
#: so splitting on it cannot cut a frame (and is far cheaper than a JSON array).
SEPARATOR = "\x1e"

#: Files written before spans kept one row per frame; they are moved over on open.
MIGRATE_EVENTS = """
INSERT OR IGNORE INTO spans (context_id, last_seq, first_seq, run_id, time, frames)
    SELECT context_id, seq, seq, run_id, time, data FROM events;
DROP TABLE events;
"""


class SQLiteStore(LocalLeases, Store):
    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thinwire-sqlite")
        self._connection: sqlite3.Connection | None = None
        #: Writes waiting for the next commit, and the commit on its way.
        self._pending: list[tuple[Write[Any], asyncio.Future[Any]]] = []
        self._in_flight: asyncio.Future[list[Landed | BaseException]] | None = None

    @classmethod
    def in_directory(cls, directory: Path | str) -> SQLiteStore:
        return cls(Path(directory) / "thinwire.sqlite3")

    async def _run(self, function: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: function(self._connect()))

    async def _write(self, function: Write[T]) -> T:
        """Run `function` in the next commit; its result once that commit is durable."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((function, future))
        if self._in_flight is None:
            self._commit_pending(loop)
        return await future

    def _commit_pending(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand every waiting write to the database thread as one commit; when it is
        done, settle each write's future and start the next commit, if any waits."""
        batch, self._pending = self._pending, []
        functions = [function for function, _ in batch]
        in_flight = loop.run_in_executor(self._executor, self._commit, functions)
        self._in_flight = in_flight

        def committed(_: object) -> None:
            outcomes: list[Landed | BaseException]
            if in_flight.cancelled():  # the loop is closing: whether it landed is unknown
                outcomes = [StoreError("the store closed during a commit")] * len(batch)
            elif (failure := in_flight.exception()) is not None:
                outcomes = [failure] * len(batch)  # the commit failed: none of them landed
            else:
                outcomes = in_flight.result()
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                if future.done():
                    continue  # its caller gave up waiting; the write stands
                if isinstance(outcome, BaseException):
                    future.set_exception(outcome)
                else:
                    future.set_result(outcome.value)
            self._in_flight = None
            if self._pending:
                self._commit_pending(loop)

        in_flight.add_done_callback(committed)

    def _commit(self, functions: list[Write[Any]]) -> list[Landed | BaseException]:
        """On the database thread: one transaction, a savepoint per write."""
        connection = self._connect()
        outcomes: list[Landed | BaseException] = []
        connection.execute("BEGIN IMMEDIATE")
        try:
            for function in functions:
                connection.execute("SAVEPOINT write")
                try:
                    outcomes.append(Landed(function(connection)))
                except Exception as exc:
                    connection.execute("ROLLBACK TO write")
                    outcomes.append(exc)
                connection.execute("RELEASE write")
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return outcomes

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE.
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.executescript(SCHEMA)
            columns = {row[1] for row in connection.execute("PRAGMA table_info(contexts)")}
            for column in ("history", "transcript"):
                if column not in columns:
                    connection.execute(f"ALTER TABLE contexts ADD COLUMN {column} TEXT")
            legacy = connection.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
            ).fetchone()
            if legacy:
                connection.executescript(f"BEGIN IMMEDIATE; {MIGRATE_EVENTS} COMMIT;")
            self._connection = connection
        return self._connection

    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        data, lists = dumps(record.rest_json()), list_writes(record)

        def create(connection: sqlite3.Connection) -> None:
            try:
                connection.execute(
                    "INSERT INTO contexts (id, agent, owner, version, data) VALUES (?, ?, ?, 1, ?)",
                    (record.id, record.agent, record.owner, data),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists(record.id) from exc
            self._append_audit(connection, record.id, 1, audit)
            write_lists(connection, record.id, lists)

        await self._write(create)
        record.stored = {write.name: write.text for write in lists}

    async def load(self, context_id: str) -> ContextRecord | None:
        def load(connection: sqlite3.Connection) -> ContextRecord | None:
            row = connection.execute(
                "SELECT agent, owner, version, data, history, transcript FROM contexts "
                "WHERE id = ?",
                (context_id,),
            ).fetchone()
            if row is None:
                return None
            agent, owner, version, data, history, transcript = row
            stored = read_lists(connection, context_id)
            # History and transcript stay text until a run uses them.
            record = ContextRecord.from_json(
                id=context_id,
                agent=agent,
                owner=owner,
                version=version,
                data=json.loads(data),
                history_json=stored.get("history", history),
                transcript_json=stored.get("transcript", transcript),
            )
            record.stored = stored
            return record

        return await self._run(load)

    async def load_transcript(self, context_id: str) -> TranscriptView | None:
        """The transcript's text as it is stored, with the small part of the record: the
        history is not read, nothing is parsed but the small part."""

        def load(connection: sqlite3.Connection) -> TranscriptView | None:
            row = connection.execute(
                "SELECT agent, owner, data, transcript FROM contexts WHERE id = ?",
                (context_id,),
            ).fetchone()
            if row is None:
                return None
            agent, owner, data, transcript = row
            parts = read_lists(connection, context_id, "transcript")
            return TranscriptView.stored(agent, owner, data, parts.get("transcript", transcript))

        return await self._run(load)

    async def save(
        self,
        record: ContextRecord,
        *,
        expected_version: int,
        audit: Sequence[AuditEntry] = (),
        events: Sequence[Event] = (),
        fence: int | None = None,
        trim_before: int | None = None,
    ) -> int:
        data, lists = dumps(record.rest_json()), list_writes(record)
        version = expected_version + 1
        self.check_fence(record.id, fence)

        def save(connection: sqlite3.Connection) -> int:
            updated = connection.execute(
                "UPDATE contexts SET data = ?, history = NULL, transcript = NULL, version = ? "
                "WHERE id = ? AND version = ?",
                (data, version, record.id, expected_version),
            ).rowcount
            if updated != 1:
                row = connection.execute(
                    "SELECT version FROM contexts WHERE id = ?", (record.id,)
                ).fetchone()
                raise VersionConflict(record.id, expected_version, row[0] if row else None)
            self._append_audit(connection, record.id, version, audit)
            write_lists(connection, record.id, lists)
            self._insert_events(connection, record.id, events)
            if trim_before is not None:
                self._trim(connection, record.id, trim_before)
            return version

        saved = await self._write(save)
        record.stored = {write.name: write.text for write in lists}
        return saved

    def _insert_events(
        self, connection: sqlite3.Connection, context_id: str, events: Sequence[Event]
    ) -> None:
        if not events:
            return
        # Each seq once (the first given), in order.
        ordered = sorted({e.seq: e for e in reversed(events)}.values(), key=attrgetter("seq"))
        kept = connection.execute(
            "SELECT first_seq, last_seq FROM spans "
            "WHERE context_id = ? AND last_seq >= ? AND first_seq <= ?",
            (context_id, ordered[0].seq, ordered[-1].seq),
        ).fetchall()
        if kept:  # a retried flush: what is kept stays as it is
            ordered = [e for e in ordered if not any(a <= e.seq <= b for a, b in kept)]
        connection.executemany(
            "INSERT INTO spans (context_id, last_seq, first_seq, run_id, time, frames) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    context_id,
                    span[-1].seq,
                    span[0].seq,
                    span[0].run_id,
                    span[0].time,
                    join_frames(span),
                )
                for span in spans(ordered)
            ],
        )

    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        def append(connection: sqlite3.Connection) -> None:
            self._insert_events(connection, context_id, events)

        if events:
            await self._write(append)

    async def read_events(self, context_id: str, after: int = 0) -> list[Event]:
        def read(connection: sqlite3.Connection) -> list[Event]:
            rows = connection.execute(
                "SELECT first_seq, run_id, time, frames FROM spans "
                "WHERE context_id = ? AND last_seq > ? ORDER BY last_seq",
                (context_id, after),
            ).fetchall()
            return [
                Event(seq=seq, run_id=run_id, data=data, time=time)
                for first, run_id, time, frames in rows
                for seq, data in enumerate(frames.split(SEPARATOR), first)
                if seq > after
            ]

        return await self._run(read)

    def _trim(self, connection: sqlite3.Connection, context_id: str, before_seq: int) -> None:
        connection.execute(
            "DELETE FROM spans WHERE context_id = ? AND last_seq < ?", (context_id, before_seq)
        )
        straddling = connection.execute(
            "SELECT last_seq, first_seq, frames FROM spans "
            "WHERE context_id = ? AND first_seq < ? AND last_seq >= ?",
            (context_id, before_seq, before_seq),
        ).fetchall()
        for last, first, frames in straddling:
            kept = frames.split(SEPARATOR)[before_seq - first :]
            connection.execute(
                "UPDATE spans SET first_seq = ?, frames = ? WHERE context_id = ? AND last_seq = ?",
                (before_seq, SEPARATOR.join(kept), context_id, last),
            )

    async def trim_events(self, context_id: str, before_seq: int) -> None:
        def trim(connection: sqlite3.Connection) -> None:
            self._trim(connection, context_id, before_seq)

        await self._write(trim)

    async def expire_events(self, before_time: float) -> int:
        def expire(connection: sqlite3.Connection) -> int:
            (frames,) = connection.execute(
                "SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM spans WHERE time < ?",
                (before_time,),
            ).fetchone()
            connection.execute("DELETE FROM spans WHERE time < ?", (before_time,))
            return int(frames)

        return await self._write(expire)

    def _append_audit(
        self,
        connection: sqlite3.Connection,
        context_id: str,
        version: int,
        audit: Sequence[AuditEntry],
    ) -> None:
        connection.executemany(
            "INSERT INTO audit (context_id, key, value, time, source, version) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                (
                    context_id,
                    entry.key,
                    json.dumps(entry.value, allow_nan=False),
                    entry.time,
                    entry.source,
                    version,
                )
                for entry in audit
            ],
        )

    async def delete(self, context_id: str) -> bool:
        self.forget_leases(context_id)

        def delete(connection: sqlite3.Connection) -> bool:
            connection.execute("DELETE FROM audit WHERE context_id = ?", (context_id,))
            connection.execute("DELETE FROM spans WHERE context_id = ?", (context_id,))
            connection.execute("DELETE FROM parts WHERE context_id = ?", (context_id,))
            deleted = connection.execute(
                "DELETE FROM contexts WHERE id = ?", (context_id,)
            ).rowcount
            return bool(deleted)

        return await self._write(delete)

    async def audit(self, context_id: str, key: str | None = None) -> list[AuditEntry]:
        def audit(connection: sqlite3.Connection) -> list[AuditEntry]:
            query = "SELECT key, value, time, source, version FROM audit WHERE context_id = ?"
            parameters: tuple[str, ...] = (context_id,)
            if key is not None:
                query += " AND key = ?"
                parameters += (key,)
            rows = connection.execute(query + " ORDER BY seq", parameters).fetchall()
            return [
                AuditEntry(key=k, value=json.loads(v), time=t, source=s, version=n)
                for k, v, t, s, n in rows
            ]

        return await self._run(audit)

    async def close(self) -> None:
        def close(connection: sqlite3.Connection) -> None:
            connection.close()
            self._connection = None

        while self._in_flight is not None:  # the writes already given land first
            await asyncio.wait([self._in_flight])
        if self._connection is not None:
            await self._run(close)
        self._executor.shutdown(wait=True)


@dataclass(frozen=True)
class Landed:
    """What a write returned, in a commit that went through."""

    value: Any


def spans(events: Sequence[Event]) -> Iterator[Sequence[Event]]:
    """Events in seq order, cut into runs of consecutive seqs of one run and one time."""
    if not events:
        return
    first = events[0]
    if [e.seq for e in events] == list(range(first.seq, first.seq + len(events))) and len(
        {(e.run_id, e.time) for e in events}
    ) == 1:
        yield events  # a flush: one span, checked at C speed
        return
    start = 0
    for index in range(1, len(events) + 1):
        if index == len(events) or not continues(events[index - 1], events[index]):
            yield events[start:index]
            start = index


def continues(previous: Event, event: Event) -> bool:
    return (
        event.seq == previous.seq + 1
        and event.run_id == previous.run_id
        and event.time == previous.time
    )


def join_frames(span: Sequence[Event]) -> str:
    joined = SEPARATOR.join([event.data for event in span])
    if joined.count(SEPARATOR) != len(span) - 1:
        raise ValueError("an event's data is not JSON: it holds a raw U+001E")
    return joined


@dataclass(frozen=True)
class ListWrite:
    """What a save writes of one of the record's lists: its whole JSON `text`, or only
    `tail`, when the text is what is stored with `tail` added before the bracket."""

    name: str
    text: str
    tail: str | None


def list_writes(record: ContextRecord) -> list[ListWrite]:
    """Serialised before any transaction starts: a non-JSON value changes nothing."""
    writes = []
    for name, text in (
        ("history", record.history_json()),
        ("transcript", record.transcript_json()),
    ):
        stored = record.stored.get(name)
        tail = None
        if stored is not None and text.startswith(stored[:-1]) and text.endswith("]"):
            tail = text[len(stored) - 1 : -1]  # what was added before the bracket
        writes.append(ListWrite(name, text, tail))
    return writes


def write_lists(connection: sqlite3.Connection, context_id: str, lists: list[ListWrite]) -> None:
    for write in lists:
        if write.tail == "":
            continue  # unchanged
        if write.tail is not None:
            (parts,) = connection.execute(
                "SELECT count(*) FROM parts WHERE context_id = ? AND list = ?",
                (context_id, write.name),
            ).fetchone()
            if 0 < parts < MAX_PARTS:
                connection.execute(
                    "INSERT INTO parts (context_id, list, seq, text) VALUES (?, ?, ?, ?)",
                    (context_id, write.name, parts, write.tail),
                )
                continue
        connection.execute(
            "DELETE FROM parts WHERE context_id = ? AND list = ?", (context_id, write.name)
        )
        connection.execute(
            "INSERT INTO parts (context_id, list, seq, text) VALUES (?, ?, 0, ?)",
            (context_id, write.name, write.text[:-1]),
        )


def read_lists(connection: sqlite3.Connection, context_id: str, *names: str) -> dict[str, str]:
    """The lists kept in parts (all, or those named), as JSON text."""
    query = "SELECT list, text FROM parts WHERE context_id = ?"
    parameters: list[str] = [context_id]
    if names:
        query += f" AND list IN ({', '.join('?' * len(names))})"
        parameters += names
    texts: dict[str, list[str]] = {}
    for name, text in connection.execute(query + " ORDER BY list, seq", parameters):
        texts.setdefault(name, []).append(text)
    return {name: "".join(parts) + "]" for name, parts in texts.items()}
