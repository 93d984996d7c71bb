"""A redis-server on a fixed loopback port that can be killed and started again on the
same port, stopped by its PID however the block ends.

With `durable=True` it keeps an append-only file fsynced on every write
(`appendfsync always`) under its own directory, so whatever Redis acknowledged comes back
after a SIGKILL: a drill may then demand that every acknowledged turn survives.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from chaos.outcome import DrillError, Skip
from chaos.procs import free_port

__all__ = ["RedisServer", "require_redis_server"]


def require_redis_server() -> str:
    """$THINWIRE_REDIS_SERVER, else redis-server on the PATH (as the test suite finds it)."""
    binary = os.environ.get("THINWIRE_REDIS_SERVER") or shutil.which("redis-server")
    if not binary:
        raise Skip("no redis-server (install Debian's redis-server, or set THINWIRE_REDIS_SERVER)")
    return binary


def answers_ping(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2) as probe:
        probe.sendall(b"PING\r\n")
        return probe.recv(16).startswith(b"+PONG")
    return False


class RedisServer:
    def __init__(self, root: Path, *, durable: bool = True) -> None:
        self.binary = require_redis_server()
        self.port = free_port()
        self.directory = root / f"redis-{self.port}"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.durable = durable
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> None:
        if self.process is not None and self.process.poll() is None:
            raise DrillError("redis-server is running already")
        appendonly = ["--appendonly", "yes", "--appendfsync", "always"]
        command = [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            *(appendonly if self.durable else ["--appendonly", "no"]),
            "--daemonize", "no",
            "--dir", str(self.directory),
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while not answers_ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise DrillError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def kill(self) -> None:
        """SIGKILL, and reap it: nothing is flushed beyond what was fsynced."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> RedisServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
