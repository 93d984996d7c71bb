"""A real redis-server for a test: started on a free loopback port, stopped by its PID.

    with serve_redis() as url:
        store = RedisStore.from_url(url)

Nothing is persisted to disk and nothing but loopback is listened on. Debian's
`redis-server` package provides the binary; `$THINWIRE_REDIS_SERVER` can name another.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from thinwire.testing.server import free_port

__all__ = ["redis_server_binary", "serve_redis"]


def redis_server_binary() -> str | None:
    return os.environ.get("THINWIRE_REDIS_SERVER") or shutil.which("redis-server")


def answers_ping(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2) as probe:
        probe.sendall(b"PING\r\n")
        return probe.recv(16).startswith(b"+PONG")
    return False


@contextlib.contextmanager
def serve_redis(directory: Path | None = None, timeout: float = 10.0) -> Iterator[str]:
    binary = redis_server_binary()
    if binary is None:
        raise RuntimeError("no redis-server: install Debian's redis-server package")
    port = free_port()
    command = [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--save", "",
        "--appendonly", "no",
        "--daemonize", "no",
        "--dir", str(directory or "/tmp"),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout
        while not answers_ping(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {port}")
            time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
