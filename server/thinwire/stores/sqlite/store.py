"""SQLiteStore: records, exchanges, audit trails and event logs in one SQLite file.

`synchronous=FULL` makes a committed save survive power loss, not only a killed
process: a save is acknowledged only once it is durable (see `commits.py`). A running
reply's frames, flushed between saves, are committed without an fsync. A save
writes the record and the exchanges that changed; a long conversation's send writes
one exchange, whatever its length.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

from thinwire.branches import WHOLE, Page, Position
from thinwire.errors import AlreadyExists, VersionConflict
from thinwire.exchanges import Exchange
from thinwire.jsontext import dumps
from thinwire.records import ContextRecord, TranscriptView, with_siblings
from thinwire.stores.base import AuditEntry, AuditPage, Event, Store, log_lost
from thinwire.stores.listing import Cursor, Summary
from thinwire.stores.sqlite import spans
from thinwire.stores.sqlite.commits import Database
from thinwire.stores.sqlite.owner import FileOwner

__all__ = ["SQLiteStore"]


class SQLiteStore(Store):
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._database = Database(self.path)
        self._owner = FileOwner(self.path)

    def describe(self) -> str:
        return f"SQLite {self.path.absolute()}"

    async def open(self) -> None:
        """Hold the file, then open it: `DataFormatTooNew` if a newer release wrote it."""
        self._owner.take()
        await self._database.read(lambda connection: None)

    @classmethod
    def in_directory(cls, directory: Path | str) -> SQLiteStore:
        return cls(Path(directory) / "thinwire.sqlite3")

    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        data, summary = dumps(record.rest_json()), Summary.of(record)
        exchanges = exchange_rows(record, record.exchanges.values())

        def create(connection: sqlite3.Connection) -> None:
            try:
                connection.execute(
                    "INSERT INTO contexts (id, agent, owner, version, data, updated, summary) "
                    "VALUES (?, ?, ?, 1, ?, ?, ?)",
                    (
                        record.id,
                        record.agent,
                        record.owner,
                        data,
                        summary.updated_at,
                        dumps(summary.to_json()),
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise AlreadyExists(record.id) from exc
            connection.executemany(
                "INSERT OR REPLACE INTO sends (owner, message_id, context_id) VALUES (?, ?, ?)",
                [(record.owner, message_id, record.id) for message_id in record.sends],
            )
            append_audit(connection, record.id, 1, audit)
            write_exchanges(connection, exchanges)

        await self._database.write(create)

    async def load(self, context_id: str) -> ContextRecord | None:
        return await self._database.read(lambda connection: load_record(connection, context_id))

    async def load_exchanges(
        self, context_id: str, positions: Sequence[Position]
    ) -> list[Exchange]:
        wanted = set(positions)
        lines: dict[int, tuple[int, int]] = {}
        for line, depth in wanted:  # one range of depths per line: a handful of queries
            low, high = lines.get(line, (depth, depth))
            lines[line] = (min(low, depth), max(high, depth))

        def load(connection: sqlite3.Connection) -> list[Exchange]:
            found = []
            for line, (low, high) in lines.items():
                for depth, messages, turns, size in connection.execute(
                    "SELECT depth, messages, turns, size FROM exchanges "
                    "WHERE context_id = ? AND line = ? AND depth BETWEEN ? AND ?",
                    (context_id, line, low, high),
                ):
                    position = Position(line, depth)
                    if position in wanted:
                        found.append(
                            Exchange(position, messages_json=messages, turns_json=turns, size=size)
                        )
            return found

        return await self._database.read(load)

    async def load_transcript(self, context_id: str, page: Page = WHOLE) -> TranscriptView | None:
        """In one trip to the database thread: the record, then each stretch of the
        page's turns joined by SQLite, as the bytes stored (`joined_turns`)."""

        def read(connection: sqlite3.Connection) -> TranscriptView | None:
            record = load_record(connection, context_id)
            if record is None:
                return None
            window = record.lines.window(page)
            if window is None:
                return TranscriptView.of(record, None, [])
            forks, parts = window.forks, []
            for segment in window.segments:
                start = segment.start
                inside = sorted(d for d in forks if segment.start <= d <= segment.end)
                for depth in [*inside, segment.end + 1]:
                    parts.append(joined_turns(connection, context_id, segment.line, start, depth))
                    if depth <= segment.end:  # an exchange with siblings: say so in its turns
                        items = joined_turns(connection, context_id, segment.line, depth, depth + 1)
                        parts.append(with_siblings(items, *forks[depth]))
                    start = depth + 1
            return TranscriptView.of(record, window, parts)

        return await self._database.read(read)

    async def list_contexts(
        self, owner: str, agent: str, limit: int, after: Cursor | None = None
    ) -> list[Summary]:
        def page(connection: sqlite3.Connection) -> list[Summary]:
            query = "SELECT id, updated, summary FROM contexts WHERE owner = ? AND agent = ?"
            parameters: list[object] = [owner, agent]
            if after is not None:  # a row value: the index seeks straight to the cursor
                query += " AND (updated, id) < (?, ?)"
                parameters += [after.updated_at, after.context_id]
            query += " ORDER BY updated DESC, id DESC LIMIT ?"
            rows = connection.execute(query, [*parameters, limit]).fetchall()
            return [Summary.from_json(i, u, json.loads(s)) for i, u, s in rows]

        return await self._database.read(page)

    async def version(self, context_id: str) -> int | None:
        def version(connection: sqlite3.Connection) -> int | None:
            row = connection.execute(
                "SELECT version FROM contexts WHERE id = ?", (context_id,)
            ).fetchone()
            return None if row is None else int(row[0])

        return await self._database.read(version)

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
        data, summary = dumps(record.rest_json()), Summary.of(record)
        cleared = record.cleared
        changed = record.exchanges.values() if cleared else record.changed_exchanges()
        exchanges = exchange_rows(record, changed)
        version = expected_version + 1

        def save(connection: sqlite3.Connection) -> int:
            updated = connection.execute(
                "UPDATE contexts SET data = ?, version = ?, updated = ?, summary = ? "
                "WHERE id = ? AND version = ?",
                (
                    data,
                    version,
                    summary.updated_at,
                    dumps(summary.to_json()),
                    record.id,
                    expected_version,
                ),
            ).rowcount
            if updated != 1:
                row = connection.execute(
                    "SELECT version FROM contexts WHERE id = ?", (record.id,)
                ).fetchone()
                raise VersionConflict(record.id, expected_version, row[0] if row else None)
            append_audit(connection, record.id, version, audit)
            if cleared:
                connection.execute("DELETE FROM exchanges WHERE context_id = ?", (record.id,))
            write_exchanges(connection, exchanges)
            spans.insert(connection, record.id, events)
            if trim_before is not None:
                spans.trim(connection, record.id, trim_before)
            return version

        saved = await self._database.write(save)
        if cleared:  # as a forget: the history dropped is still in the WAL's older pages
            await self._database.empty_log()
        return saved

    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        def append(connection: sqlite3.Connection) -> None:
            spans.insert(connection, context_id, events)

        if events:
            # A running reply's frames: kept if the process is killed; a power loss may
            # take the last second of them, never a saved turn (see commits.py).
            await self._database.write(append, durable=False)

    async def read_events(self, context_id: str, after: int = 0) -> list[Event]:
        def read(connection: sqlite3.Connection) -> list[Event]:
            return spans.read(connection, context_id, after)

        return await self._database.read(read)

    async def trim_events(self, context_id: str, before_seq: int) -> None:
        def trim(connection: sqlite3.Connection) -> None:
            spans.trim(connection, context_id, before_seq)

        await self._database.write(trim)

    async def expire_events(self, before_time: float) -> int:
        def expire(connection: sqlite3.Connection) -> int:
            return spans.expire(connection, before_time)

        return await self._database.write(expire)

    async def find_send(self, owner: str, message_id: str) -> str | None:
        def find(connection: sqlite3.Connection) -> str | None:
            row = connection.execute(
                "SELECT context_id FROM sends WHERE owner = ? AND message_id = ?",
                (owner, message_id),
            ).fetchone()
            return None if row is None else str(row[0])

        return await self._database.read(find)

    async def delete(self, context_id: str) -> bool:
        def delete(connection: sqlite3.Connection) -> bool:
            for table in ("audit", "spans", "exchanges", "sends"):
                connection.execute(f"DELETE FROM {table} WHERE context_id = ?", (context_id,))
            deleted = connection.execute(
                "DELETE FROM contexts WHERE id = ?", (context_id,)
            ).rowcount
            return bool(deleted)

        deleted = await self._database.write(delete)
        if deleted:  # its bytes, zeroed in the file, are still in the WAL's older pages
            await self._database.empty_log()
        return deleted

    async def audit(self, context_id: str, key: str | None = None) -> list[AuditEntry]:
        def audit(connection: sqlite3.Connection) -> list[AuditEntry]:
            query = (
                "SELECT key, value, time, source, version, run_id FROM audit WHERE context_id = ?"
            )
            parameters: tuple[str, ...] = (context_id,)
            if key is not None:
                query += " AND key = ?"
                parameters += (key,)
            rows = connection.execute(query + " ORDER BY seq", parameters).fetchall()
            return [
                AuditEntry(key=k, value=json.loads(v), time=t, source=s, version=n, run_id=r)
                for k, v, t, s, n, r in rows
            ]

        return await self._database.read(audit)

    async def audit_page(
        self,
        context_id: str,
        *,
        limit: int,
        key: str | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> AuditPage:
        """Numbered from the index alone (the entry's key and row, not its value), then
        the page's values read: a page of a long trail reads the page."""
        latest_first = after is None
        query = f"""
            WITH trail AS (
                SELECT seq, key, ROW_NUMBER() OVER (ORDER BY seq) AS n
                FROM audit WHERE context_id = ?
            )
            SELECT trail.n, audit.key, audit.value, audit.time, audit.source, audit.version,
                audit.run_id
            FROM trail JOIN audit ON audit.seq = trail.seq
            WHERE (? IS NULL OR trail.key = ?) AND trail.n > ? AND trail.n < ?
            ORDER BY trail.n {"DESC" if latest_first else "ASC"} LIMIT ?
        """
        bounds = (after or 0, before if before is not None else 2**62)

        def page(connection: sqlite3.Connection) -> AuditPage:
            rows = connection.execute(query, (context_id, key, key, *bounds, limit + 1)).fetchall()
            entries = [
                (n, AuditEntry(key=k, value=json.loads(v), time=t, source=s, version=o, run_id=r))
                for n, k, v, t, s, o, r in rows[:limit]
            ]
            return AuditPage(entries[::-1] if latest_first else entries, len(rows) > limit)

        return await self._database.read(page)

    async def close(self) -> None:
        await self._database.close()
        self._owner.release()


Row = tuple[str, int, int, str, str, int]


def load_record(connection: sqlite3.Connection, context_id: str) -> ContextRecord | None:
    """The stored record without its exchanges, or None."""
    row = connection.execute(
        "SELECT agent, owner, version, data FROM contexts WHERE id = ?", (context_id,)
    ).fetchone()
    if row is None:
        return None
    agent, owner, version, data = row
    return ContextRecord.from_json(
        id=context_id, agent=agent, owner=owner, version=version, data=json.loads(data)
    )


#: The turns of the exchanges of one line from one depth to another, joined: each
#: exchange's array without its brackets (SQLite's `substr` of a blob counts bytes),
#: empty ones left out (`group_concat` skips NULL), in depth order (the subquery's).
JOINED_TURNS = """
SELECT count(*), CAST(
    group_concat(CASE WHEN length(t) > 2 THEN substr(t, 2, length(t) - 2) END, ',') AS BLOB
)
FROM (
    SELECT CAST(turns AS BLOB) AS t FROM exchanges
    WHERE context_id = ? AND line = ? AND depth >= ? AND depth < ? ORDER BY depth
)
"""


def joined_turns(
    connection: sqlite3.Connection, context_id: str, line: int, start: int, end: int
) -> bytes:
    """The turns of exchanges `start` (included) to `end` (excluded) of `line`, as the
    items of one JSON array, read in one row rather than a row each; b"" for none. Any
    the store lost are logged and left out."""
    if start >= end:
        return b""
    count, joined = connection.execute(JOINED_TURNS, (context_id, line, start, end)).fetchone()
    if count != end - start:
        found = {
            depth
            for (depth,) in connection.execute(
                "SELECT depth FROM exchanges "
                "WHERE context_id = ? AND line = ? AND depth >= ? AND depth < ?",
                (context_id, line, start, end),
            )
        }
        log_lost(context_id, [Position(line, d) for d in range(start, end) if d not in found])
    return joined or b""


def exchange_rows(record: ContextRecord, exchanges: Iterable[Exchange]) -> list[Row]:
    """Serialised before any transaction starts: a non-JSON value changes nothing."""
    return [
        (record.id, e.position.line, e.position.depth, e.messages_json(), e.turns_json(), e.size)
        for e in exchanges
    ]


def write_exchanges(connection: sqlite3.Connection, rows: list[Row]) -> None:
    connection.executemany("INSERT OR REPLACE INTO exchanges VALUES (?, ?, ?, ?, ?, ?)", rows)


def append_audit(
    connection: sqlite3.Connection, context_id: str, version: int, audit: Sequence[AuditEntry]
) -> None:
    connection.executemany(
        "INSERT INTO audit (context_id, key, value, time, source, version, run_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                context_id,
                entry.key,
                json.dumps(entry.value, allow_nan=False),
                entry.time,
                entry.source,
                version,
                entry.run_id,
            )
            for entry in audit
        ],
    )
