"""`thinwire.testing.serve` as a user's code meets it outside pytest's fixtures: where its
log goes and when it is gone, the address it refuses to be told, and a server that
does not outlive the process that started it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from thinwire.testing import serve

SERVER = Path(__file__).resolve().parents[1]


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The directory temporary files go to, for this test: `tmp_path/tmp`."""
    chosen = tmp_path / "tmp"
    chosen.mkdir()
    monkeypatch.setenv("TMPDIR", str(chosen))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read $TMPDIR again
    return chosen


def test_a_log_serve_placed_itself_is_gone_once_the_server_stopped_cleanly(
    tmp_path: Path, temp_dir: Path
) -> None:
    with serve("demo", "--data-dir", str(tmp_path / "data")) as server:
        assert server.log_path.is_relative_to(temp_dir)
        assert server.log_path.parent.stat().st_mode & 0o077 == 0  # no one else's to read
        assert "Application startup complete" in server.log()
    assert list(temp_dir.iterdir()) == []


def test_a_log_is_kept_and_named_when_the_block_raised(tmp_path: Path, temp_dir: Path) -> None:
    with pytest.raises(ZeroDivisionError) as raised, serve("demo", "--data-dir", str(tmp_path)):
        1 / 0  # noqa: B018
    [note] = raised.value.__notes__
    log = Path(note.removeprefix("the thinwire server's log: "))
    assert log.is_relative_to(temp_dir) and "Application startup complete" in log.read_text()


def test_a_log_is_kept_and_named_when_the_server_failed_to_start(temp_dir: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="exited early") as failed,
        serve("serve", "no_such_module_here:app"),
    ):
        pass
    [log] = temp_dir.glob("*/thinwire-*.log")
    assert f"(its log: {log})" in str(failed.value) and "no_such_module_here" in log.read_text()


def test_without_a_data_dir_a_server_keeps_its_data_in_a_private_directory_gone_after(
    tmp_path: Path, temp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never in the project (the directory it runs in): two servers side by side do not
    share a store, and nothing of theirs, system prompts and AgentState, is left."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    monkeypatch.delenv("THINWIRE_DATA_DIR", raising=False)
    with serve("demo") as first, serve("demo") as second:
        for server in (first, second):
            assert httpx.get(f"{server.url}/healthz").status_code == 200
        stores = list(temp_dir.rglob("thinwire.sqlite3"))
        assert len(stores) == 2 and all(s.parent.stat().st_mode & 0o077 == 0 for s in stores)
        assert list(project.iterdir()) == []
    assert list(temp_dir.iterdir()) == [] and list(project.iterdir()) == []


def test_a_data_dir_named_is_the_servers_and_stays(tmp_path: Path, temp_dir: Path) -> None:
    mine = tmp_path / "mine"
    with serve("demo", env={"THINWIRE_DATA_DIR": str(mine)}):
        pass
    assert (mine / "thinwire.sqlite3").exists() and list(temp_dir.iterdir()) == []


FAILING_APP = """
import os

raise RuntimeError("the database refused " + os.environ["DATABASE_PASSWORD"])
"""


def test_a_server_that_exited_early_says_why_with_what_env_passed_redacted(
    tmp_path: Path, temp_dir: Path
) -> None:
    (tmp_path / "failing_app.py").write_text(FAILING_APP)
    password = "pw-canary-0c41d7"
    with (
        pytest.raises(RuntimeError) as failed,
        serve("serve", "failing_app:app", cwd=tmp_path, env={"DATABASE_PASSWORD": password}),
    ):
        pass
    said = str(failed.value)
    first = said.splitlines()[0]
    assert first.startswith("server exited early, with exit code 1: RuntimeError: the database")
    assert "the database refused …" in first
    assert said.splitlines()[-1] == "RuntimeError: the database refused …"
    assert password not in said
    [log] = temp_dir.glob("*/thinwire-*.log")
    assert f"its log: {log}" in first and password in log.read_text()  # all of it, kept


@pytest.mark.parametrize("arg", ["--port", "--port=8123", "--po", "--host", "--host=0.0.0.0"])
def test_an_address_in_the_arguments_is_refused_not_overridden(arg: str, temp_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"serve\(\) (gives|runs)"), serve("demo", arg, "8123"):
        pass
    assert list(temp_dir.iterdir()) == []  # refused before anything started


def test_a_port_given_is_the_port_it_serves_on(tmp_path: Path) -> None:
    with serve("demo", "--data-dir", str(tmp_path), log_dir=tmp_path) as first:
        port = first.port
    with serve("demo", "--data-dir", str(tmp_path), port=port, log_dir=tmp_path) as again:
        assert again.url.endswith(f":{port}")
        assert httpx.get(f"{again.url}/healthz").status_code == 200


def test_the_server_listens_where_serve_waits_whatever_host_the_environment_says(
    tmp_path: Path,
) -> None:
    args = ("demo", "--data-dir", str(tmp_path))
    with serve(*args, env={"HOST": "127.0.0.2"}, ready_timeout=10, log_dir=tmp_path) as server:
        assert httpx.get(f"{server.url}/healthz").status_code == 200


PARENT = """
import sys
from thinwire.testing import serve

with serve("demo", "--data-dir", sys.argv[1]) as server:
    print(server.process.pid, flush=True)
    sys.stdin.read()  # until it is killed
"""


def gone(pid: int) -> bool:
    """Exited: no such process, or a zombie its new parent has not reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_server_does_not_outlive_the_process_that_started_it(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SERVER), os.environ.get("PYTHONPATH", "")]),
    }
    with subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    ) as parent:
        assert parent.stdout is not None
        server = int(parent.stdout.readline())
        parent.kill()  # SIGKILL: no teardown of its own runs
    deadline = time.monotonic() + 20
    try:
        while not gone(server) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(server), "the server outlived the process that started it"
    finally:
        if not gone(server):
            os.kill(server, signal.SIGKILL)
