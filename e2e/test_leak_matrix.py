"""The headline promise: server-only state never crosses the wire.

A canary is planted in every server-only place (thinwire.demo.CANARY_PLACES); the demo
page is then driven through every path — streaming, reload mid-stream, stop, an agent
error, approve, reject, a server restart, a second user — over SSE and over WebSocket,
while every channel the browser has is recorded. No canary may appear in any of them.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from conftest import Demo, fresh_canaries
from test_approvals import APPROVED, REJECTED
from test_conversation import send, wait_for_reply
from test_streams import wait_for_partial_reply
from thinwire.testing import LeakRecorder
from thinwire.testing.openai_stub import OpenAIStub, Stream, finish, reasoning, text


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


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_secret_thought_a_character_at_a_time_is_caught(
    page: Page, tmp_path: Path, recorder: LeakRecorder, transport: str
) -> None:
    """The matrix's other side: a leak is caught though no byte the browser got holds it
    whole — an agent that thinks the secret a character at a time, a frame each."""
    thought = f"tw-e2e-thought-{secrets.token_hex(6)}"
    with OpenAIStub() as stub:
        env = {"OPENAI_BASE_URL": stub.url, "OPENAI_API_KEY": "test-key"}
        args = ("--model", "stub-model")
        with Demo(tmp_path, fresh_canaries(), args=args, env=env) as demo:
            stub.push(
                Stream(text("Hello.")),  # the page loads a new conversation's transcript once
                Stream([*reasoning(thought, pieces=len(thought)), *text("Done."), finish()]),
            )
            page.goto(f"{demo.url}/?user=alice&transport={transport}")
            expect(page.get_by_test_id("status")).to_have_text("idle")
            send(page, "hello")
            assert wait_for_reply(page, 1) == "Hello."
            send(page, "think aloud")
            assert wait_for_reply(page, 2) == "Done."
            leaks = recorder.leaks(page, {"thought": thought})

    # The demo page shows the thinking; the wire carried it in pieces, joined back.
    shown, joined = sorted(leaks)
    assert shown == "the thought canary leaked in DOM"
    assert re.fullmatch(
        r"the thought canary leaked in thinking deltas of run-[0-9a-f]+, joined in seq order",
        joined,
    )
