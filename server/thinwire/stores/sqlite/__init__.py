"""The embedded default store: one SQLite file, WAL, every save one transaction.

store.py     SQLiteStore: records, audit, events, over the modules below
commits.py   the database thread and group commit (every write durable before it is
             acknowledged, many writes to one fsync)
database.py  the schema, and the three older layouts moved over on open
parts.py     a conversation's history and transcript, appended to, not rewritten
spans.py     frames kept as spans of consecutive seqs, not one row each
"""

from __future__ import annotations

from thinwire.stores.sqlite.parts import MAX_PARTS
from thinwire.stores.sqlite.store import SQLiteStore

__all__ = ["MAX_PARTS", "SQLiteStore"]
