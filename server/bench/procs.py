"""Servers under test as child processes: started pinned to a core, measured, stopped.

CPU time comes from the kernel's account of the process (all its threads); peak RSS from
`VmHWM`, which is reset before each measurement where the kernel allows it (writing 5 to
`clear_refs`), so each row shows its own peak.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil

__all__ = [
    "CORES",
    "LOAD_CORES",
    "Server",
    "free_port",
    "node_server",
    "pin_self",
    "python_server",
    "started",
]

REPO = Path(__file__).resolve().parents[2]
#: Load generator processes at most: past this the servers, not the generator, are the
#: question.
MAX_LOAD_PROCESSES = 4


def _cores() -> tuple[set[int] | None, set[int] | None]:
    """(server cores, load generator cores): the server gets one core, the generator the
    others (up to MAX_LOAD_PROCESSES of them), when there are two or more."""
    available = sorted(os.sched_getaffinity(0))
    if len(available) < 2:
        return None, None
    return {available[0]}, set(available[1 : 1 + MAX_LOAD_PROCESSES])


CORES = _cores()
#: One load generator process per core of these (the first is this process's).
LOAD_CORES: list[int] = sorted(CORES[1] or [])


def pin_self() -> None:
    """Pin this process (the load generator) to its first core."""
    if LOAD_CORES:
        os.sched_setaffinity(0, {LOAD_CORES[0]})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """A running server process: its CPU seconds and peak RSS on demand."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], port: int) -> None:
        self.name = name
        self.process = process
        self.port = port
        self.ps = psutil.Process(process.pid)

    @property
    def pid(self) -> int:
        return self.process.pid

    def cpu(self) -> float:
        times = self.ps.cpu_times()
        return float(times.user + times.system)

    def cpu_fine(self) -> float:
        """CPU seconds of the process's live threads to the nanosecond (the scheduler's
        account), for a measurement shorter than `cpu`'s 10 ms ticks; `cpu` where the
        kernel does not keep it."""
        total = 0
        try:
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return self.cpu()
        return total / 1e9

    def rss(self) -> int:
        return int(self.ps.memory_info().rss)

    def reset_peak(self) -> bool:
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        except OSError:
            return False
        return True

    def peak_rss(self) -> int:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        return self.rss()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def _pin_child() -> None:
    if CORES[0] is not None:
        os.sched_setaffinity(0, CORES[0])


def _pin_to_load_core() -> None:
    """For a helper (the model stub): the generator's last core, never the server's."""
    if LOAD_CORES:
        os.sched_setaffinity(0, {LOAD_CORES[-1]})


def wait_ready(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Until GET /healthz answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if s.recv(64).startswith(b"HTTP/1.1 200"):
                return
        time.sleep(0.1)
    raise RuntimeError(f"the server on port {port} did not come up in {timeout:.0f} s")


@contextlib.contextmanager
def started(name: str, argv: Sequence[str], port: int, *, helper: bool = False) -> Iterator[Server]:
    """Start `argv` (which listens on `port`) on the server core, or a `helper` on a load
    generator core; stop it on the way out."""
    process = subprocess.Popen(
        list(argv),
        cwd=REPO,
        preexec_fn=_pin_to_load_core if helper else _pin_child,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=sys.stderr,
    )
    server = Server(name, process, port)
    try:
        wait_ready(port, process)
        yield server
    finally:
        server.stop()


def python_server(kind: str, port: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "bench.serve", kind, "--port", str(port), *extra]


def node_server(port: int) -> list[str]:
    script = REPO / "packages" / "bench" / "src" / "ai-server.mjs"
    return ["node", str(script), "--port", str(port)]
