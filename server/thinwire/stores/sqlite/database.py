"""The SQLite schema, and the older layouts an existing file is moved over from on open.

A conversation is a row of `contexts` (its record, and its summary for the lists) and a
row of `exchanges` per exchange. Older files hold one of four layouts, all moved over
once, in one transaction, when the file is opened:

1. the whole record (history and transcript included) as JSON in `contexts.data`;
2. the history and transcript in the `contexts.history` / `contexts.transcript` columns;
3. the history and transcript appended in `parts`;
4. frames one row each in an `events` table (moved into `spans`).

The file is stamped with its data format (`FORMAT`, in `PRAGMA user_version`), so that a
release refuses a file a newer one wrote instead of misreading it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from thinwire.errors import DataFormatTooNew
from thinwire.jsontext import dumps
from thinwire.records import ContextRecord
from thinwire.stores.listing import Summary

__all__ = ["BUSY_TIMEOUT", "FORMAT", "open_database"]

#: The data format of the file this release writes, stamped in `PRAGMA user_version`.
#: Raise it with any change an older release would misread or spoil (a table, a column, a
#: value stored another way), with a step in `open_database` that moves a file of the
#: format before over: a release then refuses a file of a format above its own, rather
#: than write to it. 0 is a file no release stamped: a new one, or one written before
#: formats were stamped, whose schema is format 1's.
FORMAT = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS contexts (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    -- The record's JSON without its exchanges (ContextRecord.rest_json).
    data TEXT NOT NULL,
    -- For the lists: when it was last updated, and its summary (listing.Summary).
    updated REAL,
    summary TEXT
);
CREATE INDEX IF NOT EXISTS contexts_by_owner ON contexts (owner, agent, updated, id);
CREATE TABLE IF NOT EXISTS exchanges (
    context_id TEXT NOT NULL,
    line INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    messages TEXT NOT NULL,
    turns TEXT NOT NULL,
    size INTEGER NOT NULL,
    PRIMARY KEY (context_id, line, depth)
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    time REAL NOT NULL,
    source TEXT NOT NULL,
    version INTEGER NOT NULL,
    run_id TEXT
);
CREATE INDEX IF NOT EXISTS audit_by_context ON audit (context_id, key, seq);
CREATE TABLE IF NOT EXISTS spans (
    context_id TEXT NOT NULL,
    last_seq INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    time REAL NOT NULL,
    -- The JSON of frames first_seq..last_seq, joined by spans.SEPARATOR.
    frames TEXT NOT NULL,
    PRIMARY KEY (context_id, last_seq)
);
CREATE INDEX IF NOT EXISTS spans_by_time ON spans (time);
-- The message ids of the sends that created a conversation, for retried first sends.
CREATE TABLE IF NOT EXISTS sends (
    owner TEXT NOT NULL,
    message_id TEXT NOT NULL,
    context_id TEXT NOT NULL,
    PRIMARY KEY (owner, message_id)
);
CREATE INDEX IF NOT EXISTS sends_by_context ON sends (context_id);
"""

#: Bytes of WAL kept after a checkpoint.
WAL_SIZE_LIMIT = 4 * 1024 * 1024

#: Layout 4: one row per frame, each becoming a span of one.
MIGRATE_EVENTS = """
INSERT OR IGNORE INTO spans (context_id, last_seq, first_seq, run_id, time, frames)
    SELECT context_id, seq, seq, run_id, time, data FROM events;
DROP TABLE events;
"""


#: How long a statement waits for a lock another process holds (`busy_timeout`).
BUSY_TIMEOUT = 30.0


def open_database(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are opened explicitly), WAL, every
    commit fsynced, deleted content zeroed, the schema in place, older layouts moved over
    and the file stamped with this release's `FORMAT`; `DataFormatTooNew`, the file left
    as it is, for a file of a newer release's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT)
    stamped: int = connection.execute("PRAGMA user_version").fetchone()[0]
    if stamped > FORMAT:  # before anything is written to it
        connection.close()
        raise DataFormatTooNew(str(path), stamped, FORMAT)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    # A deleted row's bytes (a forgotten conversation's, a cleared history's) are
    # overwritten with zeros, not left in free space, whatever the build's default.
    connection.execute("PRAGMA secure_delete=ON")
    # After a checkpoint the WAL shrinks back to this, instead of keeping its largest size
    # (which on a small volume is the space a full disk needs back).
    connection.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    columns = {row[1] for row in connection.execute("PRAGMA table_info(contexts)")}
    connection.executescript(SCHEMA if not columns or "updated" in columns else SCHEMA_LATER)
    if columns and "updated" not in columns:
        migrate_conversations(connection)
    audit = {row[1] for row in connection.execute("PRAGMA table_info(audit)")}
    if "run_id" not in audit:  # entries written before runs were named
        connection.execute("ALTER TABLE audit ADD COLUMN run_id TEXT")
    legacy = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
    ).fetchone()
    if legacy:
        connection.executescript(f"BEGIN IMMEDIATE; {MIGRATE_EVENTS} COMMIT;")
    if stamped < FORMAT:
        # By now the file has format 1's schema. A release that raises FORMAT moves it
        # over here a step at a time from the format stamped (0 counts as 1), each step
        # in one transaction with its stamp.
        connection.execute(f"PRAGMA user_version = {FORMAT}")
    return connection


#: The schema, less what a file of layouts 1 to 3 gets by `migrate_conversations`.
SCHEMA_LATER = SCHEMA.replace(
    "CREATE INDEX IF NOT EXISTS contexts_by_owner ON contexts (owner, agent, updated, id);", ""
)


def migrate_conversations(connection: sqlite3.Connection) -> None:
    """Layouts 1 to 3: every conversation becomes its record and its exchanges."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        connection.execute("ALTER TABLE contexts ADD COLUMN updated REAL")
        connection.execute("ALTER TABLE contexts ADD COLUMN summary TEXT")
        names = {row[1] for row in connection.execute("PRAGMA table_info(contexts)")}
        parts = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'parts'"
        ).fetchone()
        old = ", ".join(c for c in ("history", "transcript") if c in names)
        rows = connection.execute(
            f"SELECT id, agent, owner, version, data{', ' + old if old else ''} FROM contexts"
        ).fetchall()
        for row in rows:
            context_id, agent, owner, version, data = row[:5]
            fields = json.loads(data)
            columns = dict(zip(("history", "transcript"), row[5:], strict=False))
            for name in ("history", "transcript"):
                kept = read_part(connection, context_id, name) if parts else None
                text = kept or columns.get(name)
                if text is not None:
                    fields[name] = json.loads(text)
            record = ContextRecord.from_json(
                id=context_id, agent=agent, owner=owner, version=version, data=fields
            )
            summary = Summary.of(record)
            connection.execute(
                "UPDATE contexts SET data = ?, updated = ?, summary = ? WHERE id = ?",
                (
                    dumps(record.rest_json()),
                    summary.updated_at,
                    dumps(summary.to_json()),
                    context_id,
                ),
            )
            connection.executemany(
                "INSERT OR REPLACE INTO exchanges VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        context_id,
                        e.position.line,
                        e.position.depth,
                        e.messages_json(),
                        e.turns_json(),
                        e.size,
                    )
                    for e in record.exchanges.values()
                ],
            )
        for column in ("history", "transcript"):
            if column in names:
                connection.execute(f"ALTER TABLE contexts DROP COLUMN {column}")
        if parts:
            connection.execute("DROP TABLE parts")
        connection.execute(
            "CREATE INDEX IF NOT EXISTS contexts_by_owner ON contexts (owner, agent, updated, id)"
        )
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def read_part(connection: sqlite3.Connection, context_id: str, name: str) -> str | None:
    """A list kept in `parts` (layout 3), as JSON text."""
    texts = [
        text
        for (text,) in connection.execute(
            "SELECT text FROM parts WHERE context_id = ? AND list = ? ORDER BY seq",
            (context_id, name),
        )
    ]
    return "".join(texts) + "]" if texts else None
