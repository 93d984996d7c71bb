"""pytest fixtures for end-to-end tests of a thinwire app in a real Chromium.

    # conftest.py
    pytest_plugins = ["thinwire.testing.plugin"]

    def test_nothing_leaks(thinwire_server, thinwire_page, leak_recorder):
        server = thinwire_server("serve", "myproject.agents:app")
        thinwire_page.goto(server.url)
        ...
        leak_recorder.assert_no_leak(thinwire_page, {"system prompt": "canary-1"})
        leak_recorder.assert_storage_holds_only_context_ids(thinwire_page)

Chromium: `$THINWIRE_CHROMIUM`, else Playwright's own browser, else `chromium` on the
PATH — started with the flags a locked-down CI machine needs. A failing test leaves a
screenshot in `$THINWIRE_ARTIFACTS` (default: the test's tmp_path). Each server keeps
its data and its log in the test's tmp_path, never in the project (`thinwire_server`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from thinwire.testing.leaks import LeakRecorder
from thinwire.testing.server import ServerProcess, free_port, serve

__all__ = ["CHROMIUM_ARGS", "chromium_path"]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
FAILED = pytest.StashKey[bool]()


def chromium_path(playwright: Any) -> str | None:
    """The Chromium to drive; None lets Playwright use its own download."""
    configured = os.environ.get("THINWIRE_CHROMIUM")
    if configured:
        return configured
    with contextlib.suppress(Exception):
        if Path(playwright.chromium.executable_path).exists():
            return None
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no Chromium: set THINWIRE_CHROMIUM to a Chromium or Chrome binary")


@pytest.fixture(scope="session")
def thinwire_playwright() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        yield playwright


@pytest.fixture(scope="session")
def thinwire_browser(thinwire_playwright: Any) -> Iterator[Any]:
    browser = thinwire_playwright.chromium.launch(
        executable_path=chromium_path(thinwire_playwright), args=CHROMIUM_ARGS
    )
    yield browser
    browser.close()


@pytest.fixture
def thinwire_context(thinwire_browser: Any) -> Iterator[Any]:
    """A fresh browser profile: its own cookies and storage."""
    context = thinwire_browser.new_context()
    yield context
    context.close()


@pytest.fixture
def leak_recorder() -> LeakRecorder:
    return LeakRecorder()


@pytest.fixture
def thinwire_page(
    thinwire_context: Any,
    leak_recorder: LeakRecorder,
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> Iterator[Any]:
    """A page whose every channel `leak_recorder` records."""
    page = thinwire_context.new_page()
    page.set_default_timeout(10_000)
    leak_recorder.attach(page)
    yield page
    if request.node.stash.get(FAILED, False):
        artifacts = Path(os.environ.get("THINWIRE_ARTIFACTS") or tmp_path)
        artifacts.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(artifacts / f"{request.node.name}.png"))


@pytest.fixture
def thinwire_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Start `thinwire ARGS…` on a free port; every server started is stopped after. The
    keywords are `serve`'s: `env`, `cwd`, `health`, `ready_timeout`, `port`.

    A server's data (`$THINWIRE_DATA_DIR`: the default SQLite store) is
    `tmp_path/thinwire-PORT`, unless `env` names one: servers side by side do not share
    a store, and one started again on the same `port` finds its data. Its log is
    `tmp_path/thinwire-PORT.log`."""
    with contextlib.ExitStack() as stack:

        def start(
            *args: str,
            port: int | None = None,
            env: Mapping[str, str] | None = None,
            **options: Any,
        ) -> ServerProcess:
            port = port or free_port()
            env = {"THINWIRE_DATA_DIR": str(tmp_path / f"thinwire-{port}"), **(env or {})}
            return stack.enter_context(
                serve(*args, port=port, env=env, log_dir=tmp_path, **options)
            )

        yield start


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report
