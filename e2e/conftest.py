"""End-to-end fixtures: the demo served by a real uvicorn process, driven in a real
Chromium through thinwire's own pytest plugin (the one users adopt: docs/testing.md)."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page

from thinwire.demo import CANARY_PLACES
from thinwire.testing import LeakRecorder, ServerProcess, browser_storage, serve

pytest_plugins = ["thinwire.testing.plugin"]

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"
os.environ.setdefault("THINWIRE_ARTIFACTS", str(ARTIFACTS))


def storage(page: Page, area: str) -> dict[str, str]:
    """One storage area of the page, as a dict."""
    content: dict[str, str] = browser_storage(page)[area]
    return content


@dataclass
class Demo:
    """The demo served by `thinwire demo` on SQLite in its own data directory."""

    data_dir: Path
    canaries: dict[str, str]
    delay: float = 0.02
    server: ServerProcess | None = None
    #: More `thinwire demo` arguments and environment (a model, say).
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @contextlib.contextmanager
    def running(self, port: int | None = None) -> Iterator[ServerProcess]:
        env = {f"THINWIRE_DEMO_CANARY_{place.upper()}": v for place, v in self.canaries.items()}
        env.update(self.env or {})
        args = ("demo", "--delay", str(self.delay), "--data-dir", str(self.data_dir), *self.args)
        with serve(*args, port=port, env=env, log_dir=self.data_dir) as server:
            self.server = server
            yield server

    def restart(self) -> None:
        """SIGKILL the server and start a new one on the same port and data."""
        assert self.server is not None
        port = self.server.port
        self.server.kill()
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(self.running(port))

    def __enter__(self) -> Demo:
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(self.running())
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()


def fresh_canaries() -> dict[str, str]:
    """New values per server, so a leak can't hide behind a value seen before."""
    return {place: f"tw-e2e-{place}-{secrets.token_hex(6)}" for place in CANARY_PLACES}


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    ARTIFACTS.mkdir(exist_ok=True)
    with Demo(tmp_path_factory.mktemp("demo"), fresh_canaries()) as running:
        yield running


@pytest.fixture
def own_demo(tmp_path: Path) -> Iterator[Demo]:
    """A demo server of the test's own, which the test may restart."""
    with Demo(tmp_path, fresh_canaries()) as running:
        yield running


@pytest.fixture
def slow_demo(tmp_path: Path) -> Iterator[Demo]:
    """A demo whose replies take seconds, to act in the middle of one."""
    with Demo(tmp_path, fresh_canaries(), delay=0.08) as running:
        yield running


@pytest.fixture
def recorder(leak_recorder: LeakRecorder) -> LeakRecorder:
    return leak_recorder


@pytest.fixture
def context(thinwire_context: BrowserContext) -> BrowserContext:
    return thinwire_context


@pytest.fixture
def page(thinwire_page: Page) -> Page:
    return thinwire_page
