"""A `thinwire` server as a child process on a fixed loopback port: started, killed,
restarted on the same port, and always stopped by its PID.

    with Server("a", ["demo", "--data-dir", str(data)], root=root) as server:
        server.start()
        server.kill()      # SIGKILL
        server.start()     # the same port, the same data

Every start appends to one log per server (`root/NAME.log`), so a failure can be read
afterwards. Leaving the block stops the process, however the block ends. The harness
imports nothing of thinwire itself: a server that does not even import shows up as a
drill that fails with its log, not as a harness that cannot start.
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
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from chaos.outcome import DrillError

__all__ = ["Server", "free_port"]


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Server:
    def __init__(
        self,
        name: str,
        args: Sequence[str],
        *,
        root: Path,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.name = name
        self.args = list(args)
        self.env = {**os.environ, **(env or {})}
        self.port = port or free_port()
        self.log_path = root / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, ready_timeout: float = 20.0) -> float:
        """Start the process and wait until it answers /healthz; the seconds it took."""
        if self.alive():
            raise DrillError(f"{self.name} is running already")
        began = time.monotonic()
        self.starts += 1
        command = [sys.executable, "-m", "thinwire.cli", *self.args]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        with self.log_path.open("ab") as log:
            log.write(f"\n--- chaos: start {self.starts} of {self.name}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        try:
            self._wait_ready(ready_timeout)
        except BaseException:
            self.kill()
            raise
        return time.monotonic() - began

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise DrillError(f"{self.name} exited on start:\n{self.log_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(self.url + "/healthz", timeout=1) as response,
            ):
                if response.status == 200:
                    return
            time.sleep(0.05)
        raise DrillError(f"{self.name} not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(10)

    def terminate(self, timeout: float) -> float | None:
        """SIGTERM; the seconds until it exited, or None if it had to be killed after
        `timeout`."""
        if self.process is None or self.process.poll() is not None:
            return 0.0
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        return time.monotonic() - began

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not exited within 10 s."""
        self.terminate(10.0)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            text = self.log_path.read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return "(no log)"

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()
