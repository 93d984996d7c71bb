"""`thinwire serve`'s process: what it does before it serves."""

from __future__ import annotations

import gc
import signal
import sys
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from thinwire import cli, serving
from thinwire.testing import serve


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
    ],
)
def test_serve_refuses_what_is_not_an_app_in_one_line(
    args: list[str],
    complaint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "notanapp.py").write_text("value = 1\n\ndef make():\n    return 'app'\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "run", lambda *a, **k: pytest.fail("it served"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    sys.modules.pop("notanapp", None)
    with pytest.raises(SystemExit) as exited:
        cli.main(["serve", *args])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert complaint in error and "Traceback" not in error


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
        "def make():\n    return app\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    served: list[object] = []
    monkeypatch.setattr(cli, "run", lambda app, **options: served.append(app))
    assert cli.main(["serve", "goodapp:app"]) == 0
    assert cli.main(["serve", "--factory", "goodapp:make"]) == 0
    assert served[0] is served[1] is sys.modules["goodapp"].app
