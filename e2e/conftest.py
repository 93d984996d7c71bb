"""End-to-end fixtures: the demo served by a real uvicorn process, a real Chromium, and a
recorder of every channel the browser sees."""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, Playwright, Request, sync_playwright

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
    server: ServerProcess
    canaries: dict[str, str]

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="session")
def demo() -> Iterator[Demo]:
    # Fresh canaries per session, so a leak can't hide behind a value seen before.
    canaries = {
        "system_prompt": f"tw-e2e-prompt-{secrets.token_hex(6)}",
        "state": f"tw-e2e-state-{secrets.token_hex(6)}",
        "tool_output": f"tw-e2e-tool-{secrets.token_hex(6)}",
    }
    env = {
        "THINWIRE_DEMO_CANARY_PROMPT": canaries["system_prompt"],
        "THINWIRE_DEMO_CANARY_STATE": canaries["state"],
        "THINWIRE_DEMO_CANARY_TOOL": canaries["tool_output"],
    }
    ARTIFACTS.mkdir(exist_ok=True)
    with serve("demo", "--delay", "0.02", env=env, log_dir=ARTIFACTS) as server:
        yield Demo(server, canaries)


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
class Recorder:
    """Everything that crossed into the browser during a test."""

    requests: list[Request] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def attach(self, page: Page) -> None:
        page.on("requestfinished", lambda request: self.requests.append(request))
        page.on("requestfailed", lambda request: self.requests.append(request))
        page.on("console", lambda message: self.console.append(self.describe(message)))
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))

    @staticmethod
    def describe(message: ConsoleMessage) -> str:
        return f"{message.type}: {message.text}"

    def channels(self, page: Page) -> dict[str, str]:
        """Channel name -> everything it carried, as text."""
        seen: dict[str, str] = {}
        for index, request in enumerate(self.requests):
            where = f"request {index} {request.method} {request.url}"
            seen[f"{where} (request headers)"] = str(request.all_headers())
            seen[f"{where} (request body)"] = request.post_data or ""
            response = request.response()
            if response is not None:
                seen[f"{where} (response headers)"] = str(response.all_headers())
                seen[f"{where} (response body)"] = body_text(response)
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
def page(browser: Browser, recorder: Recorder, request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    recorder.attach(page)
    yield page
    if request.node.stash.get(FAILED, False):
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"))
    context.close()
