"""The embedded default store: one SQLite file, WAL, every save one transaction.

All database work runs on one dedicated thread, so the event loop never blocks on disk
and the connection is never shared between threads. `synchronous=FULL` makes a
committed save survive power loss, not only a killed process: a save is acknowledged
only once it is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from thinwire.stores.base import (
    AlreadyExists,
    AuditEntry,
    ContextRecord,
    Event,
    Store,
    VersionConflict,
)
from thinwire.stores.leases import LocalLeases

__all__ = ["SQLiteStore"]

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS contexts (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    data TEXT NOT NULL
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
CREATE TABLE IF NOT EXISTS events (
    context_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    data TEXT NOT NULL,
    time REAL NOT NULL,
    PRIMARY KEY (context_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS events_by_time ON events (time);
"""


class SQLiteStore(LocalLeases, Store):
    def __init__(self, path: Path | str) -> None:
        super().__init__()
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thinwire-sqlite")
        self._connection: sqlite3.Connection | None = None

    @classmethod
    def in_directory(cls, directory: Path | str) -> SQLiteStore:
        return cls(Path(directory) / "thinwire.sqlite3")

    async def _run(self, function: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: function(self._connect()))

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE.
            connection = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            connection.executescript(SCHEMA)
            self._connection = connection
        return self._connection

    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        data = encode_record(record)

        def create(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                try:
                    connection.execute(
                        "INSERT INTO contexts (id, agent, owner, version, data) "
                        "VALUES (?, ?, ?, 1, ?)",
                        (record.id, record.agent, record.owner, data),
                    )
                except sqlite3.IntegrityError as exc:
                    raise AlreadyExists(record.id) from exc
                self._append_audit(connection, record.id, 1, audit)

        await self._run(create)

    async def load(self, context_id: str) -> ContextRecord | None:
        def load(connection: sqlite3.Connection) -> ContextRecord | None:
            row = connection.execute(
                "SELECT agent, owner, version, data FROM contexts WHERE id = ?", (context_id,)
            ).fetchone()
            if row is None:
                return None
            agent, owner, version, data = row
            return ContextRecord.from_json(
                id=context_id, agent=agent, owner=owner, version=version, data=json.loads(data)
            )

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
        data = encode_record(record)
        version = expected_version + 1
        self.check_fence(record.id, fence)

        def save(connection: sqlite3.Connection) -> int:
            with transaction(connection):
                updated = connection.execute(
                    "UPDATE contexts SET data = ?, version = ? WHERE id = ? AND version = ?",
                    (data, version, record.id, expected_version),
                ).rowcount
                if updated != 1:
                    row = connection.execute(
                        "SELECT version FROM contexts WHERE id = ?", (record.id,)
                    ).fetchone()
                    raise VersionConflict(record.id, expected_version, row[0] if row else None)
                self._append_audit(connection, record.id, version, audit)
                self._insert_events(connection, record.id, events)
                if trim_before is not None:
                    connection.execute(
                        "DELETE FROM events WHERE context_id = ? AND seq < ?",
                        (record.id, trim_before),
                    )
            return version

        return await self._run(save)

    def _insert_events(
        self, connection: sqlite3.Connection, context_id: str, events: Sequence[Event]
    ) -> None:
        connection.executemany(
            "INSERT OR IGNORE INTO events (context_id, seq, run_id, data, time) "
            "VALUES (?, ?, ?, ?, ?)",
            [(context_id, e.seq, e.run_id, e.data, e.time) for e in events],
        )

    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        def append(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                self._insert_events(connection, context_id, events)

        if events:
            await self._run(append)

    async def read_events(self, context_id: str, after: int = 0) -> list[Event]:
        def read(connection: sqlite3.Connection) -> list[Event]:
            rows = connection.execute(
                "SELECT seq, run_id, data, time FROM events "
                "WHERE context_id = ? AND seq > ? ORDER BY seq",
                (context_id, after),
            ).fetchall()
            return [Event(seq=q, run_id=r, data=d, time=t) for q, r, d, t in rows]

        return await self._run(read)

    async def trim_events(self, context_id: str, before_seq: int) -> None:
        def trim(connection: sqlite3.Connection) -> None:
            with transaction(connection):
                connection.execute(
                    "DELETE FROM events WHERE context_id = ? AND seq < ?", (context_id, before_seq)
                )

        await self._run(trim)

    async def expire_events(self, before_time: float) -> int:
        def expire(connection: sqlite3.Connection) -> int:
            with transaction(connection):
                return connection.execute(
                    "DELETE FROM events WHERE time < ?", (before_time,)
                ).rowcount

        return await self._run(expire)

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
            with transaction(connection):
                connection.execute("DELETE FROM audit WHERE context_id = ?", (context_id,))
                connection.execute("DELETE FROM events WHERE context_id = ?", (context_id,))
                deleted = connection.execute(
                    "DELETE FROM contexts WHERE id = ?", (context_id,)
                ).rowcount
            return bool(deleted)

        return await self._run(delete)

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

        if self._connection is not None:
            await self._run(close)
        self._executor.shutdown(wait=True)


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE … COMMIT, or ROLLBACK on any exception."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def encode_record(record: ContextRecord) -> str:
    """Serialised before any transaction starts: a non-JSON value changes nothing."""
    return json.dumps(record.to_json(), allow_nan=False, separators=(",", ":"))
