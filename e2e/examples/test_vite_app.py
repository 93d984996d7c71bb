"""examples/vite-app: a stock Vite + React + TypeScript app with @thinwire/react, built
strict against the installed tarballs, served by the installed `thinwire serve
agents:app` from its own directory, and developed through Vite's dev server and proxy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_page import expect_status, last, partial_texts, send, watch_stream
from playwright.sync_api import Page, expect
from userland import npm, prepared, serve_installed, vite_dev_server

from thinwire.testing import LeakRecorder, ServerProcess

#: Kept on the server (agents.py's system prompt): never on the page.
SECRET = {"system prompt": "refunds over $100 need a manager"}
FIRST_REPLY = "Order 1234 was delivered: $40. "
APPROVED = "Done: $40 is on its way back."


@pytest.fixture(scope="module")
def app() -> Path:
    """The example, built as its README says: `npm run build` (`tsc -b && vite build`)."""
    app = prepared().example("vite-app")
    npm("run", "build", cwd=app)
    return app


@pytest.fixture
def server(app: Path, tmp_path: Path) -> Iterator[ServerProcess]:
    env = {"THINWIRE_DATA_DIR": str(tmp_path / "data")}
    with serve_installed(
        prepared(), "serve", "agents:app", cwd=app, env=env, log_dir=tmp_path
    ) as s:
        yield s


def test_builds_strict_against_the_installed_packages(app: Path) -> None:
    # Strict: TypeScript's default since 6.0, as the template leaves it.
    typescript = json.loads((app / "node_modules/typescript/package.json").read_text())
    assert int(typescript["version"].split(".")[0]) >= 6
    assert '"strict": false' not in (app / "tsconfig.app.json").read_text()
    resolved = (app / "package-lock.json").read_text()
    assert '"resolved": "file:../client.tgz"' in resolved
    assert '"resolved": "file:../react.tgz"' in resolved
    assert (app / "dist" / "index.html").is_file()
    assert list((app / "dist" / "assets").glob("*.js"))


def converse(page: Page, url: str, recorder: LeakRecorder) -> None:
    """Ask for a refund, watch the reply stream, approve it, and check what the page kept."""
    page.goto(url)
    expect_status(page, "idle")
    replies = page.locator("li.assistant")
    watch_stream(page, "li.assistant")
    send(page, "Please refund order 1234")

    approval = page.get_by_role("region", name="Approval")
    alert = page.get_by_role("alert")
    expect(approval.or_(alert)).to_be_visible()
    assert not alert.count(), f"the page shows an error: {alert.text_content()}"
    expect(approval).to_contain_text("Refund $40 on order 1234?")
    expect(last(replies)).to_have_text(FIRST_REPLY)
    assert len(partial_texts(page, FIRST_REPLY)) >= 3, "the reply did not stream"
    expect(page.get_by_text("Looking up the order first.")).to_be_visible()
    expect(page.get_by_role("list", name="Tools")).to_contain_text("lookup_order: ok")
    expect(page.get_by_role("button", name="Send")).to_be_disabled()  # a decision waits

    approval.get_by_role("button", name="approve").click()
    expect(approval).to_have_count(0)
    expect(last(replies)).to_have_text(APPROVED)
    expect_status(page, "idle")
    expect(page.get_by_role("list", name="Tools")).to_contain_text("issue_refund: ok")

    page.reload()  # the conversation comes back from the server
    expect(replies).to_have_text([FIRST_REPLY, APPROVED])
    recorder.assert_storage_holds_only_context_ids(page)
    recorder.assert_no_leak(page, SECRET)


def test_production_build_served_by_thinwire(
    page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    converse(page, server.url, leak_recorder)


def test_stop_a_waiting_run_and_dismiss_an_error(page: Page, server: ServerProcess) -> None:
    page.goto(server.url)
    send(page, "Please refund order 1234")
    approval = page.get_by_role("region", name="Approval")
    expect(approval).to_be_visible()
    replies = page.locator("li.assistant")
    expect(replies).to_have_text([FIRST_REPLY])  # paused for the approval, not cut short
    page.get_by_role("button", name="Stop").click()  # ends the run that waits for a decision
    expect(approval).to_have_count(0)
    expect_status(page, "idle")
    # The reply that asked ends there, stopped.
    expect(replies).to_have_text([FIRST_REPLY + " (stopped)"])

    send(page, "x" * 40_000)  # over the server's 32 KiB limit: refused with 413
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("exceeds")
    # Refused, so the text comes back to the box to fix.
    expect(page.get_by_label("Message")).to_have_value("x" * 40_000)
    expect_status(page, "error")
    alert.get_by_role("button", name="Dismiss").click()
    expect(alert).to_have_count(0)
    expect_status(page, "idle")


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_vite_dev_server_proxies_http_and_websocket(
    page: Page,
    leak_recorder: LeakRecorder,
    server: ServerProcess,
    app: Path,
    transport: str,
    tmp_path: Path,
) -> None:
    with vite_dev_server(app, {"THINWIRE_URL": server.url}, log_dir=tmp_path) as dev:
        converse(page, f"{dev}/?transport={transport}", leak_recorder)
    if transport == "websocket":
        assert leak_recorder.websocket_frames, "no WebSocket frames went through the proxy"
    assert all(request.url.startswith(dev) for request in leak_recorder.requests)
