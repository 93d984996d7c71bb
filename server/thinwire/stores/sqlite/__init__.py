"""The embedded default store: one SQLite file, WAL, every save one transaction.

store.py     SQLiteStore: records, exchanges, lists, audit, events, over the modules below
commits.py   the database thread and group commit (every write durable before it is
             acknowledged, many writes to one fsync)
database.py  the schema, and the older layouts moved over on open
spans.py     frames kept as spans of consecutive seqs, not one row each
"""

from __future__ import annotations

from thinwire.stores.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
