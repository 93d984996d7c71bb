"""A real thinwire server for a test: a free port and a process.

    with serve("serve", "myproject.agents:app") as server:
        httpx.get(server.url + "/healthz")

The process is started with uvicorn through the `thinwire` CLI's own interpreter, waited
for until it answers, and stopped by its PID (SIGTERM, then SIGKILL) however the block
ends.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ServerProcess", "free_port", "serve"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class ServerProcess:
    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM, then SIGKILL if it has not exited in `timeout` seconds."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        return self.process.returncode

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)


def wait_until_ready(server: ServerProcess, timeout: float, health: str = "/healthz") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"server exited early:\n{server.log()}")
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(server.url + health, timeout=1) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(f"server not ready after {timeout}s:\n{server.log()}")


@contextlib.contextmanager
def serve(
    *args: str,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    log_dir: Path | None = None,
    ready_timeout: float = 20.0,
    health: str = "/healthz",
    cwd: Path | None = None,
) -> Iterator[ServerProcess]:
    """Run `thinwire ARGS… --port PORT` (e.g. `serve("demo")`) until the block ends. It is
    ready when `health` answers 200 (e.g. "/api/healthz" for an app mounted at /api);
    `cwd` is the directory it runs in (where `thinwire serve module:app` finds module)."""
    port = port or free_port()
    log_dir = log_dir or Path(os.environ.get("TMPDIR", "/tmp"))
    log_path = log_dir / f"thinwire-{port}.log"
    command = [sys.executable, "-m", "thinwire.cli", *args, "--port", str(port)]
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
    server = ServerProcess(process, port, log_path)
    try:
        wait_until_ready(server, ready_timeout, health)
        yield server
    finally:
        server.stop()
