"""A small filesystem for a drill to fill: a tmpfs of a few megabytes, mounted for the
block and unmounted after it, however it ends.

Mounting needs root (or CAP_SYS_ADMIN); where it is not permitted the drill is skipped
with the reason `mount` gives, not failed.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from chaos.outcome import Skip

__all__ = ["fill", "small_filesystem"]


@contextlib.contextmanager
def small_filesystem(path: Path, size: str = "3m") -> Iterator[Path]:
    """A tmpfs of `size` at `path` (created) for the block."""
    if shutil.which("mount") is None or shutil.which("umount") is None:
        raise Skip("no mount/umount command here")
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0700"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "chaos-diskfull", str(path)],
        capture_output=True,
        text=True,
        timeout=10,
    )
    if mounted.returncode != 0:
        reason = (mounted.stderr.strip().splitlines() or ["mount failed"])[0]
        raise Skip(f"mounting a tmpfs is not permitted here: {reason}")
    try:
        yield path
    finally:
        unmounted = subprocess.run(["umount", str(path)], capture_output=True, timeout=10)
        if unmounted.returncode != 0:  # still busy: detach it now, freed when let go
            subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=10)


def fill(path: Path, chunk: int = 64 * 1024) -> int:
    """Write `path` until the filesystem has no room left; the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as filler:
        for size in (chunk, 4096, 512, 1):
            block = b"\0" * size
            while True:
                try:
                    count = filler.write(block)
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break
                if not count:
                    break
                written += count
    return written
