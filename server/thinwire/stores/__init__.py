"""Stores: where conversations live between runs. See `base.py` for the contract."""

from __future__ import annotations

from thinwire.stores.base import (
    AlreadyExists,
    AuditEntry,
    ContextRecord,
    Event,
    LeaseLost,
    Store,
    StoreError,
    VersionConflict,
)
from thinwire.stores.memory import MemoryStore
from thinwire.stores.sqlite import SQLiteStore

__all__ = [
    "AlreadyExists",
    "AuditEntry",
    "ContextRecord",
    "Event",
    "LeaseLost",
    "MemoryStore",
    "SQLiteStore",
    "Store",
    "StoreError",
    "VersionConflict",
]
