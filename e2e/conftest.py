"""End-to-end fixtures: the demo served by a real uvicorn process, a real Chromium, and a
recorder of every channel the browser sees."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Playwright,
    Request,
    WebSocket,
    sync_playwright,
)

from thinwire.testing import ServerProcess, serve

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str:
    configured = os.environ.get("THINWIRE_CHROMIUM")
    if configured:
        return configured
    return subprocess.run(
        [str(HERE / "find-chromium")], check=True, capture_output=True, text=True
    ).stdout.strip()


@dataclass
class Demo:
    """The demo served by `thinwire demo` on SQLite in its own data directory."""

    data_dir: Path
    canaries: dict[str, str]
    delay: float = 0.02
    server: ServerProcess | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @contextlib.contextmanager
    def running(self, port: int | None = None) -> Iterator[ServerProcess]:
        env = {
            "THINWIRE_DEMO_CANARY_PROMPT": self.canaries["system_prompt"],
            "THINWIRE_DEMO_CANARY_STATE": self.canaries["state"],
            "THINWIRE_DEMO_CANARY_TOOL": self.canaries["tool_output"],
        }
        args = ("demo", "--delay", str(self.delay), "--data-dir", str(self.data_dir))
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
    return {
        "system_prompt": f"tw-e2e-prompt-{secrets.token_hex(6)}",
        "state": f"tw-e2e-state-{secrets.token_hex(6)}",
        "tool_output": f"tw-e2e-tool-{secrets.token_hex(6)}",
    }


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


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as instance:
        yield instance


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@dataclass
class Exchange:
    """One request and its response, captured as soon as the request finished."""

    request: Request
    request_headers: str
    response_headers: str
    response_body: str


@dataclass
class Recorder:
    """Everything that crossed into the browser during a test."""

    exchanges: list[Exchange] = field(default_factory=list)
    websocket_frames: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    @property
    def requests(self) -> list[Request]:
        return [exchange.request for exchange in self.exchanges]

    def attach(self, page: Page) -> None:
        page.on("requestfinished", self.capture)
        page.on("requestfailed", self.capture)
        page.on("websocket", self.watch_socket)
        page.on("console", lambda message: self.console.append(self.describe(message)))
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))

    def capture(self, request: Request) -> None:
        # Read the body now: the browser may drop it after a reload or navigation.
        response = request.response()
        self.exchanges.append(
            Exchange(
                request=request,
                request_headers=str(request.all_headers()),
                response_headers=str(response.all_headers()) if response else "",
                response_body=body_text(response) if response else "",
            )
        )

    def watch_socket(self, socket: WebSocket) -> None:
        def record(direction: str) -> Callable[[str | bytes], None]:
            return lambda payload: self.websocket_frames.append(f"{direction} {payload!s}")

        socket.on("framesent", record("sent"))
        socket.on("framereceived", record("received"))

    @staticmethod
    def describe(message: ConsoleMessage) -> str:
        return f"{message.type}: {message.text}"

    def channels(self, page: Page) -> dict[str, str]:
        """Channel name -> everything it carried, as text."""
        seen: dict[str, str] = {}
        for index, exchange in enumerate(self.exchanges):
            request = exchange.request
            where = f"request {index} {request.method} {request.url}"
            seen[f"{where} (request headers)"] = exchange.request_headers
            seen[f"{where} (request body)"] = request.post_data or ""
            seen[f"{where} (response headers)"] = exchange.response_headers
            seen[f"{where} (response body)"] = exchange.response_body
        seen["WebSocket frames"] = "\n".join(self.websocket_frames)
        seen["console"] = "\n".join(self.console)
        seen["cookies"] = str(page.context.cookies())
        seen["localStorage"] = str(storage(page, "localStorage"))
        seen["sessionStorage"] = str(storage(page, "sessionStorage"))
        seen["DOM"] = page.content()
        return seen

    def assert_no_leak(self, page: Page, canaries: dict[str, str]) -> None:
        leaks = [
            f"the {name} canary leaked in {channel}"
            for channel, text in self.channels(page).items()
            for name, canary in canaries.items()
            if canary in text
        ]
        assert not leaks, "\n".join(leaks)


def body_text(response: Any) -> str:
    try:
        return str(response.body().decode("utf-8", "replace"))
    except Exception:  # a redirect or an aborted stream has no body to read
        return ""


def storage(page: Page, name: str) -> dict[str, str]:
    return dict(
        page.evaluate(
            f"() => Object.fromEntries(Object.keys({name}).map(k => [k, {name}.getItem(k)]))"
        )
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash.setdefault(FAILED, report.failed)
    return report


FAILED = pytest.StashKey[bool]()


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh browser profile: its own cookies and storage."""
    context = browser.new_context()
    yield context
    context.close()


@pytest.fixture
def page(
    context: BrowserContext, recorder: Recorder, request: pytest.FixtureRequest
) -> Iterator[Page]:
    page = context.new_page()
    page.set_default_timeout(10_000)
    recorder.attach(page)
    yield page
    if request.node.stash.get(FAILED, False):
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"))
