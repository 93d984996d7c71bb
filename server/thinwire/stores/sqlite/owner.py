"""One process owns a SQLite store. A second server on the same file would answer from
copies it keeps of conversations the first goes on changing, and each would refuse the
other's saves. An advisory lock on `<file>.lock`, held while the store is open, makes the
second refuse to start instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from thinwire.errors import Misconfigured

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: not enforced
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileOwner"]


class FileOwner:
    def __init__(self, database: Path) -> None:
        self.path = database.with_name(database.name + ".lock")
        self._held: IO[bytes] | None = None

    def take(self) -> None:
        """Hold the lock, or `Misconfigured` if another process holds it."""
        if self._held is not None or fcntl is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        file = self.path.open("a+b")
        try:
            fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.close()
            raise Misconfigured(
                f"another process serves {self.path.with_suffix('')}: one process owns a "
                "SQLite store (several replicas share a Redis, see docs/deploy.md)"
            ) from None
        self._held = file

    def release(self) -> None:
        if self._held is not None:
            self._held.close()  # which releases the lock
            self._held = None
