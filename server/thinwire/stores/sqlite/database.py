"""The SQLite schema, and the older layouts an existing file is moved over from on open.

Older files hold one of three layouts, each still read or moved over:

1. the whole record (history and transcript included) as JSON in `contexts.data`;
2. the history and transcript in the `contexts.history` / `contexts.transcript` columns;
3. frames one row each in an `events` table.

Layouts 1 and 2 are read as they are and rewritten into `parts` by the context's next
save; layout 3 is moved into `spans` once, when the file is opened.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["open_database"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS contexts (
    id TEXT PRIMARY KEY,
    agent TEXT NOT NULL,
    owner TEXT NOT NULL,
    version INTEGER NOT NULL,
    -- The record's JSON without its history and transcript, which are in parts
    -- (older rows: in the two columns below, or in data itself).
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

#: Layout 3: one row per frame, each becoming a span of one.
MIGRATE_EVENTS = """
INSERT OR IGNORE INTO spans (context_id, last_seq, first_seq, run_id, time, frames)
    SELECT context_id, seq, seq, run_id, time, data FROM events;
DROP TABLE events;
"""


def open_database(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are opened explicitly), WAL, every
    commit fsynced, the schema in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, isolation_level=None, timeout=30)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    # After a checkpoint the WAL shrinks back to this, instead of keeping its largest size
    # (which on a small volume is the space a full disk needs back).
    connection.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    connection.executescript(SCHEMA)
    columns = {row[1] for row in connection.execute("PRAGMA table_info(contexts)")}
    for column in ("history", "transcript"):  # files from before layout 2
        if column not in columns:
            connection.execute(f"ALTER TABLE contexts ADD COLUMN {column} TEXT")
    legacy = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'"
    ).fetchone()
    if legacy:
        connection.executescript(f"BEGIN IMMEDIATE; {MIGRATE_EVENTS} COMMIT;")
    return connection
