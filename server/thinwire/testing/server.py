"""A real thinwire server for a test: a free port and a process.

    with serve("serve", "myproject.agents:app") as server:
        httpx.get(server.url + "/healthz")

The process is started with uvicorn through the `thinwire` CLI's own interpreter, waited
for until it answers, and stopped by its PID (SIGTERM, then SIGKILL) however the block
ends. On Linux it also gets SIGTERM if the process that started it dies first (pytest
killed outright runs no teardown).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ServerProcess", "free_port", "serve"]

#: Where the server listens, and where `serve` waits for it.
HOST = "127.0.0.1"
#: prctl(2): the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1
#: How much of its log an error about a server quotes: the end, where it says why.
TAIL_LINES = 12
#: What uvicorn says last when an app's startup failed: the line before says why.
EPILOGUE = "Application startup failed. Exiting."
#: A value passed in `env` this long or longer is redacted from what an error quotes of
#: the log (an API key, a password); a shorter one is no secret.
SECRET_LENGTH = 8


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
        return f"http://{HOST}:{self.port}"

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


def wait_until_ready(
    server: ServerProcess,
    timeout: float,
    health: str = "/healthz",
    secrets: Collection[str] = (),
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = server.process.poll()
        if code is not None:
            raise RuntimeError(told(f"server exited early, with exit code {code}", server, secrets))
        with (
            contextlib.suppress(OSError, urllib.error.URLError),
            urllib.request.urlopen(server.url + health, timeout=1) as response,
        ):
            if response.status == 200:
                return
        time.sleep(0.05)
    raise TimeoutError(told(f"server not ready after {timeout}s", server, secrets))


def told(what: str, server: ServerProcess, secrets: Collection[str]) -> str:
    """`what` happened, and why as the end of the server's log says it, in its first
    line, then that end — each of `secrets` in it shown as `…`: an error's message ends
    up in CI output, which the whole log, kept in its file, should not."""
    text = server.log()
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "…")
    tail = text.rstrip().splitlines()[-TAIL_LINES:]
    said = [line.strip() for line in tail if line.strip() and not line.endswith(EPILOGUE)]
    why = f": {said[-1]}" if said else ""
    return "\n".join([f"{what}{why} (its log: {server.log_path}), which ends:", *tail])


def refuse_address(args: tuple[str, ...]) -> None:
    """`serve` says where the server listens: an address in `args` would be overridden
    (argparse takes the last `--port`), or leave it waiting where the server is not."""
    for arg in args:
        name = arg.split("=", 1)[0]
        if len(name) < 3 or not name.startswith("--"):
            continue
        if "--port".startswith(name):
            raise ValueError(f"serve() gives the server its port: pass port=… instead of {arg!r}")
        if "--host".startswith(name):
            raise ValueError(
                f"serve() runs the server on {HOST}, where it waits for it to answer: "
                f"leave out {arg!r}"
            )


def dies_with_parent() -> Callable[[], None] | None:
    """Linux: a function for the child, before it runs the server, that asks for SIGTERM
    when the thread that started it ends — the test process killed without running its
    teardown, say. None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not after fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def ask() -> None:
        prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM))
        if os.getppid() != parent:  # died before it was asked: no signal will come
            os.kill(os.getpid(), signal.SIGTERM)

    return ask


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
    """Run `thinwire ARGS… --host 127.0.0.1 --port PORT` (e.g. `serve("demo")`) until the
    block ends. `port` is a free one unless given (the same again: a restart); `--port` or
    `--host` in ARGS is refused. It is ready when `health` answers 200 (e.g.
    "/api/healthz" for an app mounted at /api); `cwd` is the directory it runs in (where
    `thinwire serve module:app` finds module).

    Its data (`$THINWIRE_DATA_DIR`: the default SQLite store) is where `env`, or else this
    process's environment, names (or the demo's `--data-dir`); without one, in a private
    temporary directory removed once the server stops, however the block ends — never the
    directory it runs in.

    Its output goes to `log_dir/thinwire-PORT.log`. Without a `log_dir`, the log is in a
    private temporary directory, removed once the block ends and the server stops —
    unless the server failed to start (the error names the log, and says why as its end
    does, with each value of `env` but the data directory redacted) or the block raised
    (a note on the exception names it): what the server logged may hold secrets.
    """
    refuse_address(args)
    port = port or free_port()
    environment = {**os.environ, **(env or {})}
    secrets = [
        value
        for name, value in (env or {}).items()
        if len(value) >= SECRET_LENGTH and name != "THINWIRE_DATA_DIR"  # a path, and ours
    ]
    own_dir = log_dir is None
    log_dir = Path(tempfile.mkdtemp(prefix="thinwire-")) if log_dir is None else log_dir
    log_path = log_dir / f"thinwire-{port}.log"
    data_dir = None
    named = any(arg.split("=", 1)[0] == "--data-dir" for arg in args)  # the demo's option
    if not named and not environment.get("THINWIRE_DATA_DIR"):
        data_dir = tempfile.mkdtemp(prefix="thinwire-data-")
        environment["THINWIRE_DATA_DIR"] = data_dir
    command = [sys.executable, "-m", "thinwire.cli", *args, "--host", HOST, "--port", str(port)]
    try:
        with log_path.open("wb") as log_file:
            process = subprocess.Popen(
                command,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=environment,
                cwd=cwd,
                preexec_fn=dies_with_parent(),
            )
        server = ServerProcess(process, port, log_path)
        try:
            wait_until_ready(server, ready_timeout, health, secrets)
            try:
                yield server
            except BaseException as exc:
                exc.add_note(f"the thinwire server's log: {log_path}")
                raise
        finally:
            server.stop()
    finally:
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)
    if own_dir:
        shutil.rmtree(log_dir, ignore_errors=True)
