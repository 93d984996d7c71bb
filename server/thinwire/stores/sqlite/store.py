"""SQLiteStore: records, audit trails and event logs in one SQLite file.

`synchronous=FULL` makes a committed save survive power loss, not only a killed
process: a save is acknowledged only once it is durable (see `commits.py`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from thinwire.errors import AlreadyExists, VersionConflict
from thinwire.jsontext import dumps
from thinwire.records import ContextRecord, TranscriptView
from thinwire.stores.base import AuditEntry, Event, Store
from thinwire.stores.sqlite import spans
from thinwire.stores.sqlite.commits import Database
from thinwire.stores.sqlite.parts import list_writes, read_lists, write_lists

__all__ = ["SQLiteStore"]


class SQLiteStore(Store):
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._database = Database(self.path)

    @classmethod
    def in_directory(cls, directory: Path | str) -> SQLiteStore:
        return cls(Path(directory) / "thinwire.sqlite3")

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
            connection.executemany(
                "INSERT OR REPLACE INTO sends (owner, message_id, context_id) VALUES (?, ?, ?)",
                [(record.owner, message_id, record.id) for message_id in record.sends],
            )
            append_audit(connection, record.id, 1, audit)
            write_lists(connection, record.id, lists)

        await self._database.write(create)
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

        return await self._database.read(load)

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

        return await self._database.read(load)

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
        data, lists = dumps(record.rest_json()), list_writes(record)
        version = expected_version + 1

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
            append_audit(connection, record.id, version, audit)
            write_lists(connection, record.id, lists)
            spans.insert(connection, record.id, events)
            if trim_before is not None:
                spans.trim(connection, record.id, trim_before)
            return version

        saved = await self._database.write(save)
        record.stored = {write.name: write.text for write in lists}
        return saved

    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        def append(connection: sqlite3.Connection) -> None:
            spans.insert(connection, context_id, events)

        if events:
            await self._database.write(append)

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
            for table in ("audit", "spans", "parts", "sends"):
                connection.execute(f"DELETE FROM {table} WHERE context_id = ?", (context_id,))
            deleted = connection.execute(
                "DELETE FROM contexts WHERE id = ?", (context_id,)
            ).rowcount
            return bool(deleted)

        return await self._database.write(delete)

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

        return await self._database.read(audit)

    async def close(self) -> None:
        await self._database.close()


def append_audit(
    connection: sqlite3.Connection, context_id: str, version: int, audit: Sequence[AuditEntry]
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
