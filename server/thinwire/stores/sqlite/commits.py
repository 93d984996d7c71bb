"""The database thread and group commit.

All database work runs on one dedicated thread, so the event loop never blocks on disk
and the connection is never shared between threads. Writes that arrive while a commit
is on its way to disk wait and then share the next one: one transaction and one fsync
for all of them, each in a savepoint of its own, so a write that fails is rolled back
alone and the others still land. No write is acknowledged before the commit that holds
it is durable — except a write given as not `durable` (a running reply's frames, flushed
so that a killed process keeps them): a commit of only such writes skips the fsync. It
still survives the process being killed (it is in the OS's cache), and the next durable
commit makes it durable too, as the log is written in order.

The driver's errors leave as `StoreError` (`raise … from`), never as `sqlite3` ones, and
what SQLite said goes to the log only. A commit that fails (a full disk, say) drops the
connection, so the next write starts on a fresh one: freeing the space is enough to
recover, no restart needed.

A delete that must leave nothing behind (a forget, a clear) is followed by `empty_log`:
the WAL holds an image of every page a commit wrote since it was last truncated, so the
deleted rows' bytes stay in it (the file itself zeroes them, `secure_delete`) until it is
checkpointed and truncated to nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from thinwire.errors import StoreError
from thinwire.stores.sqlite.database import BUSY_TIMEOUT, open_database

__all__ = ["Database", "Work"]

logger = logging.getLogger("thinwire.stores")

T = TypeVar("T")
Work = Callable[[sqlite3.Connection], T]

#: When another process's reader holds the WAL, the first wait before it is tried again,
#: and the longest (each wait doubles the one before).
RETRY_FIRST, RETRY_MOST = 0.05, 30.0


@dataclass(frozen=True)
class Landed:
    """What a write returned, in a commit that went through."""

    value: Any


class Repeats:
    """One log line per kind of failure every `quiet` seconds: a full disk fails every
    commit of every run, and each line would be logged on the full disk's own volume.
    The next line says how many were left out."""

    def __init__(self, quiet: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.quiet, self.clock = quiet, clock
        self._logged: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def log(self, exc: BaseException) -> None:
        said, now = repr(exc), self.clock()
        last = self._logged.get(said)
        if last is not None and now - last < self.quiet:
            self._left_out[said] = self._left_out.get(said, 0) + 1
            return
        if len(self._logged) > 100:  # failures of many kinds: forget the old ones
            self._logged.clear()
        self._logged[said] = now
        more = self._left_out.pop(said, 0)
        also = f" ({more} more like it in the last {self.quiet:g} s)" if more else ""
        logger.warning("sqlite failed: %s%s", said, also)


REPEATS = Repeats()


def unavailable(exc: BaseException) -> BaseException:
    """A driver error as the store's own; anything else as it is."""
    if isinstance(exc, sqlite3.Error):
        REPEATS.log(exc)
        error = StoreError("the store is unavailable; try again shortly")
        error.__cause__ = exc
        return error
    return exc


def database_thread() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="thinwire-sqlite")


class Database:
    """One SQLite file, reached from the event loop through its own thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._executor = database_thread()
        self._connection: sqlite3.Connection | None = None
        #: Writes waiting for the next commit, and the commit on its way.
        self._pending: list[tuple[Work[Any], asyncio.Future[Any], bool]] = []
        #: The connection's `synchronous` setting (FULL: commits fsync).
        self._fsync = True
        self._in_flight: asyncio.Future[list[Landed | BaseException]] | None = None
        #: Emptying the WAL again, while another process's reader holds it.
        self._emptying: asyncio.Task[None] | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            try:
                self._connection = open_database(self.path)
            except (OSError, sqlite3.OperationalError) as exc:  # name the file it could not open
                raise sqlite3.OperationalError(f"cannot open {self.path}: {exc}") from exc
        return self._connection

    def _drop_connection(self) -> None:
        """On the database thread, after a failure: the next use opens a fresh one."""
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
            self._connection = None
            self._fsync = True  # a new connection starts as open_database sets it

    def _read(self, work: Work[T]) -> T:
        try:
            return work(self._connect())
        except sqlite3.Error:
            self._drop_connection()
            raise

    async def read(self, work: Work[T]) -> T:
        """Run `work` on the database thread, outside any transaction of ours."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._read, work)
        except sqlite3.Error as exc:
            raise unavailable(exc) from exc

    async def write(self, work: Work[T], *, durable: bool = True) -> T:
        """Run `work` in the next commit; its result once that commit is durable (once it
        is committed, if not `durable`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((work, future, durable))
        if self._in_flight is None:
            self._commit_pending(loop)
        return await future

    def _commit_pending(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand every waiting write to the database thread as one commit; when it is
        done, settle each write's future and start the next commit, if any waits."""
        batch, self._pending = self._pending, []
        works = [work for work, _, _ in batch]
        fsync = any(durable for _, _, durable in batch)
        in_flight = loop.run_in_executor(self._executor, self._commit, works, fsync)
        self._in_flight = in_flight

        def committed(_: object) -> None:
            outcomes: list[Landed | BaseException]
            if in_flight.cancelled():  # the loop is closing: whether it landed is unknown
                outcomes = [StoreError("the store closed during a commit")] * len(batch)
            elif (failure := in_flight.exception()) is not None:
                # The commit failed: none of them landed.
                outcomes = [unavailable(failure)] * len(batch)
            else:
                outcomes = in_flight.result()
            for (_, future, _), outcome in zip(batch, outcomes, strict=True):
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

    def _commit(self, works: list[Work[Any]], fsync: bool) -> list[Landed | BaseException]:
        """On the database thread: one transaction, a savepoint per write."""
        connection = self._connect()
        if fsync != self._fsync:
            connection.execute(f"PRAGMA synchronous={'FULL' if fsync else 'NORMAL'}")
            self._fsync = fsync
        outcomes: list[Landed | BaseException] = []
        connection.execute("BEGIN IMMEDIATE")
        try:
            for work in works:
                connection.execute("SAVEPOINT write")
                try:
                    outcomes.append(Landed(work(connection)))
                except Exception as exc:
                    connection.execute("ROLLBACK TO write")
                    outcomes.append(unavailable(exc))
                connection.execute("RELEASE write")
            connection.execute("COMMIT")
        except BaseException:
            self._drop_connection()  # rolls back whatever is still open
            raise
        return outcomes

    async def empty_log(self) -> None:
        """Copy the WAL into the file and truncate it to nothing, on the database thread
        between two commits: no older image of a page stays in it. Once a delete has
        committed, its rows are then nowhere in the files.

        A reader in another process (a backup, the sqlite3 shell) may still need the WAL:
        the checkpoint then gives up at once rather than hold every request up behind it,
        and is tried again in the background, less and less often, until it goes through
        or the store closes."""
        if await self._truncate_log():
            return
        if self._emptying is None or self._emptying.done():
            logger.warning(
                "%s-wal is not truncated: another process reads the file, or the checkpoint "
                "failed. It keeps pages of a forgotten or cleared conversation until it is; "
                "trying again",
                self.path,
            )
            self._emptying = asyncio.create_task(self._empty_log_later())

    async def _empty_log_later(self) -> None:
        wait = RETRY_FIRST
        while True:
            await asyncio.sleep(wait)
            if await self._truncate_log():
                logger.info("%s-wal is truncated", self.path)
                return
            wait = min(2 * wait, RETRY_MOST)

    async def _truncate_log(self) -> bool:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._checkpoint)
        except sqlite3.Error as exc:
            logger.warning("checkpointing %s failed: %r", self.path, exc)
            return False

    def _checkpoint(self) -> bool:
        """On the database thread: a checkpoint that truncates the WAL, True if it did.
        It does not wait for another process's reader (`busy_timeout` 0): the thread
        serves every request."""
        connection = self._connect()
        try:
            connection.execute("PRAGMA busy_timeout=0")
            try:
                busy: int = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                connection.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
        except sqlite3.Error:
            self._drop_connection()
            raise
        return busy == 0

    async def close(self) -> None:
        """Let the writes already given land, then close the file."""

        if self._emptying is not None:  # closing the file empties the WAL if it can
            self._emptying.cancel()
            await asyncio.wait([self._emptying])
            self._emptying = None
        while self._in_flight is not None:
            await asyncio.wait([self._in_flight])
        if self._connection is not None:
            await asyncio.get_running_loop().run_in_executor(self._executor, self._drop_connection)
        self._executor.shutdown(wait=True)
        # The store may be opened again (an app's lifespan run once per test): a fresh
        # pool, whose thread starts only when it is used.
        self._executor = database_thread()
