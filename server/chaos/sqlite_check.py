"""`PRAGMA integrity_check` of a SQLite store as the disk holds it now.

The check runs on a copy (the database and its WAL), so it can look at the file a
SIGKILL left behind without recovering it for the server: the restarted server must do
that itself.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

__all__ = ["integrity"]


def integrity(database: Path) -> str:
    """`ok`, or what SQLite found wrong (a missing file says so)."""
    if not database.exists():
        return f"no database at {database}"
    with tempfile.TemporaryDirectory(prefix="chaos-integrity-") as directory:
        for suffix in ("", "-wal", "-journal"):
            source = database.with_name(database.name + suffix)
            if source.exists():
                shutil.copyfile(source, Path(directory) / source.name)
        connection = sqlite3.connect(Path(directory) / database.name)
        try:
            rows = connection.execute("PRAGMA integrity_check").fetchall()
        except sqlite3.Error as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()
    return "; ".join(str(row[0]) for row in rows)
