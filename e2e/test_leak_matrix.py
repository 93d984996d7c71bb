"""The headline promise: server-only state never crosses the wire.

A canary is planted in every server-only place (thinwire.demo.CANARY_PLACES); the demo
page is then driven through every path — streaming, reload mid-stream, stop, an agent
error, approve, reject, a server restart, a second user — over SSE and over WebSocket,
while every channel the browser has is recorded. No canary may appear in any of them.
"""

from __future__ import annotations

import re
import sqlite3

import pytest
from playwright.sync_api import Page, expect

from conftest import Demo
from test_approvals import APPROVED, REJECTED
from test_conversation import send, wait_for_reply
from test_streams import wait_for_partial_reply
from thinwire.testing import LeakRecorder


def stored_bytes(demo: Demo) -> str:
    """Everything in the demo's SQLite store, as text."""
    with sqlite3.connect(demo.data_dir / "thinwire.sqlite3") as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        assert {"contexts", "audit", "spans"} <= set(tables)
        rows = [db.execute(f"SELECT * FROM {table}").fetchall() for table in tables]
    return repr(rows)


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_no_canary_reaches_any_channel_on_any_path(
    page: Page, slow_demo: Demo, recorder: LeakRecorder, transport: str
) -> None:
    demo = slow_demo
    page.goto(f"{demo.url}/?user=alice&transport={transport}")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    turns = 0

    send(page, "hello there")  # stream, and reload in the middle of it
    wait_for_partial_reply(page)
    page.reload()
    turns += 2
    wait_for_reply(page, turns // 2)

    send(page, "please stop halfway")  # stop
    wait_for_partial_reply(page)
    page.get_by_test_id("stop").click()
    expect(page.get_by_test_id("turn-ending").last).to_have_attribute("data-stop-reason", "stopped")
    turns += 2

    send(page, "explode")  # an agent exception
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("agent_error")
    reference = re.search(r"err-[0-9a-f]{12}", error.text_content() or "")
    assert reference is not None
    turns += 2

    send(page, "call this conversation Canary-free")  # the agent names it: a title frame
    wait_for_reply(page, turns // 2 + 1)
    turns += 2

    send(page, "a refund please")  # approve
    page.get_by_test_id("decide-approve").click()
    turns += 3
    expect(page.get_by_test_id("turn")).to_have_count(turns)
    expect(page.get_by_test_id("turn-text").last).to_have_text(APPROVED)

    send(page, "another refund")  # reject
    page.get_by_test_id("decide-reject").click()
    turns += 3
    expect(page.get_by_test_id("turn-text").last).to_have_text(REJECTED)

    assert demo.server is not None
    log_before_restart = demo.server.log()
    demo.restart()  # the conversation survives a SIGKILL
    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(turns)

    page.get_by_test_id("user-select").select_option("bob")  # a second user
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "hi from bob")
    wait_for_reply(page, 1)
    page.get_by_test_id("user-select").select_option("alice")
    expect(page.get_by_test_id("turn")).to_have_count(turns)

    # The canaries really were planted on the server...
    assert demo.canaries["log"] in log_before_restart
    assert (
        reference.group(0) in log_before_restart
        and demo.canaries["exception"] in log_before_restart
    )
    stored = stored_bytes(demo)
    for place in (
        "system_prompt",
        "history",
        "tool_arguments",
        "tool_output",
        "state",
        "checkpoint",
    ):
        assert demo.canaries[place] in stored, place
    for place in ("invocation_state", "shared_state"):  # ...these never even persisted...
        assert demo.canaries[place] not in stored, place

    # ...the recorder really saw the wire...
    titled = [*recorder.fetched.values(), *recorder.websocket_frames]
    assert any('"type":"title","title":"Canary-free"' in text for text in titled)
    if transport == "sse":
        assert any('"type":"interrupt"' in text for text in recorder.fetched.values())
    else:
        assert any('"type":"interrupt"' in frame for frame in recorder.websocket_frames)
        assert any('"type":"decide"' in frame for frame in recorder.websocket_frames)

    # ...and not one canary crossed into the browser, by any channel.
    recorder.assert_no_leak(page, demo.canaries)
    stored_ids = recorder.assert_storage_holds_only_context_ids(page)
    assert sorted(stored_ids) == ["thinwire:demo:alice:contextId", "thinwire:demo:bob:contextId"]
