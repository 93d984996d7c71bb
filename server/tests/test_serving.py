"""`thinwire serve`'s process: what it does before it serves."""

from __future__ import annotations

import errno
import gc
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from uvicorn.config import LOG_LEVELS

from thinwire import cli, demo, serving
from thinwire.stores.redis import FORMAT as REDIS_FORMAT
from thinwire.stores.sqlite.database import FORMAT as SQLITE_FORMAT
from thinwire.testing import serve


@pytest.fixture(autouse=True)
def thinwire_logger() -> Iterator[logging.Logger]:
    """thinwire's logger, put back as it was once `cli.main` configured it (its handler
    writes to a stream the test captured, closed after it)."""
    logger = logging.getLogger("thinwire")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield logger
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


def test_what_startup_made_is_frozen_out_of_the_collector_before_serving(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen_when_served: list[int] = []
    monkeypatch.setattr(
        serving.DrainingServer, "run", lambda self: frozen_when_served.append(gc.get_freeze_count())
    )
    gc.unfreeze()
    try:
        serving.run(
            Starlette(),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            shutdown_timeout=1.0,
            max_connections=0,
            header_timeout=5.0,
        )
    finally:
        gc.unfreeze()
    assert frozen_when_served and frozen_when_served[0] > 0


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["notanapp:value"], "notanapp:value is 'int', not an ASGI app"),
        (["--factory", "notanapp:value"], "is 'int', not a function returning an ASGI app"),
        (["--factory", "notanapp:make"], "notanapp:make() returned 'str', not an ASGI app"),
        (["no_such_module_here:app"], 'Could not import module "no_such_module_here"'),
        (["notanapp:missing"], 'Attribute "missing" not found in module "notanapp"'),
        (["notanapp"], 'must be in format "<module>:<attribute>"'),
        (["notanapp:plain"], "notanapp:plain is the function plain, not an ASGI app"),
        (["notanapp:Klass"], "is the class Klass, not an ASGI app"),
        (["notanapp:make"], "a factory making one needs --factory"),
        (["notanapp:two"], "an async function that cannot take scope, receive, send"),
        (["--factory", "notanapp:app"], "is an ASGI app, not a factory: serve it without"),
        (["--factory", "notanapp:plain"], "notanapp:plain takes arguments: a factory is called"),
        (["--factory", "notanapp:gives_plain"], "notanapp:gives_plain() returned the function"),
    ],
)
def test_serve_refuses_what_is_not_an_app_in_one_line(
    args: list[str],
    complaint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "notanapp.py").write_text(
        "from starlette.applications import Starlette\n"
        "value = 1\n"
        "app = Starlette()\n"
        "def make():\n    return 'app'\n"
        "def plain(x):\n    return x\n"
        "def gives_plain():\n    return plain\n"
        "class Klass:\n    pass\n"
        "async def two(scope, receive):\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "run", lambda *a, **k: pytest.fail("it served"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    sys.modules.pop("notanapp", None)
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", *args])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith("thinwire serve: error: ") and error.count("\n") == 1
    assert complaint in error


@pytest.mark.parametrize(
    ("options", "scheme"), [((), "https"), (("--forwarded-allow-ips", "10.9.9.9"), "http")]
)
def test_only_the_named_proxies_say_which_scheme_was_used(
    options: tuple[str, ...], scheme: str, tmp_path: Path
) -> None:
    """By default the proxy on this host is believed; named others, it is not."""
    with serve("demo", "--data-dir", str(tmp_path), *options) as server:
        card = httpx.get(
            f"{server.url}/a2a/demo/.well-known/agent-card.json",
            headers={"x-forwarded-proto": "https"},
        )
    assert card.json()["supportedInterfaces"][0]["url"].startswith(f"{scheme}://")


def test_ctrl_c_shuts_down_without_a_traceback(tmp_path: Path) -> None:
    with serve("demo", "--data-dir", str(tmp_path), log_dir=tmp_path) as server:
        server.process.send_signal(signal.SIGINT)
        code = server.process.wait(timeout=20)
        log = server.log()
    assert code == 130, log
    assert "Traceback" not in log and "KeyboardInterrupt" not in log


def test_serve_takes_an_app_and_a_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "goodapp.py").write_text(
        "from starlette.applications import Starlette\n\napp = Starlette()\n\n"
        "def make():\n    return app\n\n"
        "async def bare(scope, receive, send, *rest):\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    served: list[object] = []
    monkeypatch.setattr(cli, "run", lambda app, **options: served.append(app))
    assert cli.main(["serve", "goodapp:app"]) == 0
    assert cli.main(["serve", "--factory", "goodapp:make"]) == 0
    assert served[0] is served[1] is sys.modules["goodapp"].app
    assert cli.main(["serve", "goodapp:bare"]) == 0  # an ASGI app need not be a framework's


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[dict[str, Any]]:
    """The options `thinwire serve goodapp:app` would serve with, one dict per serve."""
    (tmp_path / "goodapp.py").write_text(
        "from starlette.applications import Starlette\n\napp = Starlette()\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("PORT", raising=False)
    options: list[dict[str, Any]] = []
    monkeypatch.setattr(cli, "run", lambda app, **given: options.append(given))
    return options


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--port", "-5"),
        ("--port", "70000"),
        ("--port", "abc"),
        ("--max-connections", "-5"),
        ("--header-timeout", "0"),
        ("--header-timeout", "-1"),
        ("--header-timeout", "inf"),
        ("--shutdown-timeout", "-3"),
        ("--shutdown-timeout", "nan"),
    ],
)
def test_a_number_out_of_range_is_refused_before_anything_starts(
    option: str, value: str, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "goodapp:app", option, value])
    assert exited.value.code == 2 and not served
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"thinwire serve: error: argument {option}: must be a ")
    assert error.endswith(f"not {value!r}")


def test_the_demos_delay_is_refused_out_of_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["demo", "--delay", "-1"])
    assert exited.value.code == 2
    assert "argument --delay: must be a number of seconds, 0 or more" in capsys.readouterr().err


def test_the_ends_of_each_range_are_taken(served: list[dict[str, Any]]) -> None:
    options = ["--port", "65535", "--max-connections", "0", "--shutdown-timeout", "0"]
    assert cli.main(["serve", "goodapp:app", *options, "--header-timeout", "0.5"]) == 0
    assert served[0]["port"] == 65535 and served[0]["max_connections"] == 0
    assert served[0]["shutdown_timeout"] == 0 and served[0]["header_timeout"] == 0.5


def test_port_comes_from_the_environment_and_a_bad_one_is_named(
    served: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["serve", "goodapp:app"]) == 0
    monkeypatch.setenv("PORT", "9001")
    assert cli.main(["serve", "goodapp:app"]) == 0
    monkeypatch.setenv("PORT", "abc")
    assert cli.main(["serve", "goodapp:app", "--port", "9002"]) == 0  # not read at all
    assert [options["port"] for options in served] == [8000, 9001, 9002]
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "goodapp:app"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error == "thinwire serve: error: $PORT must be a whole number, 0-65535, not 'abc'\n"


@pytest.mark.parametrize(
    "level", ["critical", "error", "warning", "info", "debug", "trace", "TRACE"]
)
def test_every_uvicorn_log_level_is_taken(level: str, served: list[dict[str, Any]]) -> None:
    assert cli.main(["serve", "goodapp:app", "--log-level", level]) == 0
    assert served[0]["log_level"] == level.lower()
    assert logging.getLogger("thinwire").level == LOG_LEVELS[level.lower()]  # trace: 5


def test_trace_is_taken_in_a_fresh_process(tmp_path: Path) -> None:
    """Before uvicorn has named its level 5 `TRACE`, as the first thing the CLI does."""
    command = [sys.executable, "-m", "thinwire.cli", "serve", "no_such_module_here:app"]
    ended = subprocess.run(
        [*command, "--log-level", "trace"], capture_output=True, text=True, cwd=tmp_path, timeout=30
    )
    assert ended.returncode == 2, ended.stderr  # past the logging, to the module
    assert 'Could not import module "no_such_module_here"' in ended.stderr
    assert "Traceback" not in ended.stderr


@pytest.mark.parametrize("level", ["bogus", "10", "notset"])
def test_an_unknown_log_level_is_refused_in_one_line(
    level: str, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "goodapp:app", "--log-level", level])
    assert exited.value.code == 2 and not served
    error = capsys.readouterr().err
    assert f"argument --log-level: invalid choice: {level!r}" in error and "trace" in error


def test_version_is_the_packages_with_the_data_formats_it_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"thinwire {version('thinwire')} (data formats: SQLite {SQLITE_FORMAT}, "
        f"Redis {REDIS_FORMAT})"
    )


def test_an_app_create_app_refuses_is_one_line_naming_the_module(
    served: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "weakapp.py").write_text(
        "from thinwire import MemoryStore, anonymous, create_app\n"
        "from thinwire.demo import DemoAgent\n\n"
        "app = create_app(\n"
        "    {'demo': DemoAgent}, identify=anonymous, store=MemoryStore(), operator_token='short'\n"
        ")\n"
    )
    sys.modules.pop("weakapp", None)
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", "weakapp:app"])
    assert exited.value.code == 2 and not served
    error = capsys.readouterr().err
    assert error.startswith(  # one line, not argparse's usage: the command line was right
        "thinwire serve: error: weakapp:app: create_app (weakapp.py, line 4) refused: "
        "operator_token must be at least 16 characters"
    )
    assert error.count("\n") == 1


def test_an_error_of_the_modules_own_keeps_its_traceback(
    served: list[dict[str, Any]], tmp_path: Path
) -> None:
    (tmp_path / "buggyapp.py").write_text("app = int('not a number')\n")
    sys.modules.pop("buggyapp", None)
    with pytest.raises(ValueError, match="invalid literal"):
        cli.main(["serve", "buggyapp:app"])


def test_a_data_dir_that_is_a_file_is_named_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "run", lambda *a, **k: pytest.fail("it served"))
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as exited:
        cli.main(["demo", "--data-dir", str(tmp_path / "file")])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert error == (
        f"thinwire demo: error: --data-dir {tmp_path / 'file'} is a file: name a directory\n"
    )


def test_a_model_named_without_the_openai_sdk_is_refused_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cli, "run", lambda *a, **k: pytest.fail("it served"))
    monkeypatch.setitem(sys.modules, "openai", None)  # the plain wheel: `import openai` fails
    with pytest.raises(SystemExit) as exited:
        cli.main(["demo", "--data-dir", str(tmp_path), "--model", "gpt-4o"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "thinwire demo: error: the demo's --model gpt-4o needs the openai SDK: "
        'pip install "thinwire[openai]"\n'
    )


def test_a_data_dir_the_secret_cannot_be_written_to_names_both_ways_out(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read-only directory, as this test's user (root, maybe) may not be able to make
    one: the file system's refusal, as it comes."""

    def read_only(path: str, *args: Any) -> int:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    monkeypatch.setattr(cli, "run", lambda *a, **k: pytest.fail("it served"))
    monkeypatch.delenv("THINWIRE_DEMO_SECRET", raising=False)
    monkeypatch.setattr(demo.os, "open", read_only)
    with pytest.raises(SystemExit) as exited:
        cli.main(["demo", "--data-dir", str(tmp_path)])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == (
        f"thinwire demo: error: cannot keep the demo's cookie secret in {tmp_path / 'demo-secret'}"
        " (Read-only file system): name a writable --data-dir, or set $THINWIRE_DEMO_SECRET"
    )
