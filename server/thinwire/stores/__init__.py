"""Stores: where conversations live between runs. See `base.py` for the contract."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

from thinwire.branches import Page
from thinwire.errors import AlreadyExists, LeaseLost, StoreError, VersionConflict
from thinwire.records import ContextRecord, TranscriptView
from thinwire.stores.base import AuditEntry, AuditPage, Event, RunEvents, Store
from thinwire.stores.memory import MemoryStore
from thinwire.stores.sqlite import SQLiteStore


def store_from_url(url: str) -> Store:
    """A store named by URL: `redis://host:6379/0?prefix=myapp` (several replicas),
    `sqlite:///data/app.db` (relative to the working directory, as in SQLAlchemy),
    `sqlite:////var/lib/app.db` (absolute: four slashes), or `memory://`."""
    parts = urlsplit(url)
    if parts.scheme in ("redis", "rediss", "unix"):
        from thinwire.stores.redis import RedisStore

        # `prefix` is ours; the rest of the query (`db=` on a unix socket…) is redis-py's.
        query = parse_qsl(parts.query, keep_blank_values=True)
        prefix = next((v for k, v in query if k == "prefix"), "thinwire")
        rest = urlencode([(k, v) for k, v in query if k != "prefix"])
        # Cut the query off the URL as written: urlunsplit would turn `unix:///sock`
        # into `unix:/sock`, which redis-py 6 and later refuse.
        plain = url.split("?", 1)[0] + (f"?{rest}" if rest else "")
        return RedisStore.from_url(plain, prefix=prefix)
    if parts.scheme == "sqlite":
        # SQLAlchemy's convention: what follows "sqlite:///" is the path as written.
        path = url.split(":///", 1)[1].split("?", 1)[0] if ":///" in url else ""
        if not path:
            raise ValueError("a SQLite URL names a file: sqlite:///relative.db, sqlite:////abs.db")
        return SQLiteStore(path)
    if parts.scheme == "memory":
        return MemoryStore()
    raise ValueError(f"no store for {parts.scheme!r} URLs: use redis://, sqlite:/// or memory://")


__all__ = [
    "AlreadyExists",
    "AuditEntry",
    "AuditPage",
    "ContextRecord",
    "Event",
    "LeaseLost",
    "MemoryStore",
    "Page",
    "RunEvents",
    "SQLiteStore",
    "Store",
    "StoreError",
    "TranscriptView",
    "VersionConflict",
    "store_from_url",
]
