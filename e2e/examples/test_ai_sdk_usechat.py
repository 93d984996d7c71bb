"""examples/ai-sdk-usechat: a Vite + React page built on the AI SDK's own `useChat` and
`DefaultChatTransport` (`ai` 7.0.173, `@ai-sdk/react` 4.0.177, from npm), served by the
installed `thinwire serve agents:app`: it sends, streams, resumes after a reload, stops
the run on the server, regenerates the latest reply, answers the agent's question (again,
when the server refused the answer), and keeps nothing server-only."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chat_page import expect_status, last, partial_texts, send, watch_stream
from playwright.sync_api import BrowserContext, Page, Route, expect
from userland import ROOT, npm, prepared, serve_installed

from thinwire.testing import LeakRecorder, ServerProcess

#: Kept on the server by agents.py: never on the page, in any channel.
SECRETS = {
    "system prompt": "refunds over $100 need a manager",
    "agent state": "internal score 87",
    "tool argument": "wk-5531-internal",
    "tool output": "B7-internal",
}
FIRST_WORDS = "Order 1234 was delivered: $40. "
FULL_REPLY = (
    FIRST_WORDS + "It left our warehouse on Monday, travelled with the usual carrier and was "
    "signed for at your door on Wednesday afternoon. Ask me for a refund if something is "
    "wrong with it."
)
#: The text of the reply on the page (its tools and thinking are paragraphs of their own).
REPLY_TEXT = "li.assistant > p:not(.tool)"


@pytest.fixture(scope="module")
def app() -> Path:
    """The example, built as its README says: `npm run build` (`tsc -b && vite build`)."""
    app = prepared().example("ai-sdk-usechat")
    npm("run", "build", cwd=app)
    return app


@pytest.fixture
def server(app: Path, tmp_path: Path) -> Iterator[ServerProcess]:
    env = {"THINWIRE_DATA_DIR": str(tmp_path / "data")}
    with serve_installed(
        prepared(), "serve", "agents:app", cwd=app, env=env, log_dir=tmp_path
    ) as s:
        yield s


def turns(server: ServerProcess, context_id: str) -> list[dict[str, Any]]:
    """The conversation as the server keeps it (thinwire's own transcript route)."""
    url = f"{server.url}/agents/assistant/contexts/{context_id}"
    with urllib.request.urlopen(url, timeout=10) as response:
        result: list[dict[str, Any]] = json.load(response)["turns"]
    return result


def context_id(recorder: LeakRecorder, page: Page) -> str:
    """The one thing the page keeps: the conversation's id."""
    stored = recorder.assert_storage_holds_only_context_ids(page)
    assert len(stored) == 1, stored
    return next(iter(stored.values()))


def test_builds_strict_against_the_sdk_from_npm(app: Path) -> None:
    for package, version in (("ai", "7.0.173"), ("@ai-sdk/react", "4.0.177")):
        installed = json.loads((app / "node_modules" / package / "package.json").read_text())
        assert installed["version"] == version
    assert "@thinwire" not in (app / "package-lock.json").read_text()  # the SDK's client only
    assert '"strict": false' not in (app / "tsconfig.app.json").read_text()
    assert (app / "dist" / "index.html").is_file()


def test_send_stream_reload_mid_reply_and_resume(
    page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    page.goto(server.url)
    expect_status(page, "ready")
    watch_stream(page, REPLY_TEXT)
    send(page, "Where is my order?")
    reply = last(page.locator(REPLY_TEXT))
    expect(reply).to_contain_text("It left our warehouse")  # streaming, and then the tab reloads
    assert len(partial_texts(page, FULL_REPLY)) >= 3, "the reply did not stream"
    expect(page.get_by_role("list", name="Conversation")).to_contain_text(
        "lookup_order: output-available"
    )

    page.reload()
    watch_stream(page, REPLY_TEXT)
    expect(page.locator("li.user")).to_have_text(["Where is my order?"])  # from the server
    expect(reply).to_have_text(FULL_REPLY)
    expect_status(page, "ready")
    assert len(partial_texts(page, FULL_REPLY)) >= 2, "the resumed reply did not stream"
    expect(page.locator("li.assistant")).to_have_count(1)  # resumed, not repeated
    # useChat({ resume: true }) asks on every load: nothing yet, then the reply in progress.
    resumed = [
        e.request.response()
        for e in leak_recorder.exchanges
        if e.request.method == "GET" and e.request.url.endswith("/stream")
    ]
    assert [(r.status, r.headers.get("x-vercel-ai-ui-message-stream")) for r in resumed if r] == [
        (204, None),
        (200, "v1"),
    ]

    said = turns(server, context_id(leak_recorder, page))
    assert [(t["role"], t["text"]) for t in said] == [
        ("user", "Where is my order?"),
        ("assistant", FULL_REPLY),
    ]
    leak_recorder.assert_no_leak(page, SECRETS)


def test_stop_ends_the_run_on_the_server(
    page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    page.goto(server.url)
    send(page, "Where is my order?")
    reply = last(page.locator(REPLY_TEXT))
    expect(reply).to_contain_text("It left")
    page.get_by_role("button", name="Stop").click()
    expect_status(page, "ready")
    shown = reply.text_content()
    assert shown and FULL_REPLY.startswith(shown) and shown != FULL_REPLY

    # The server ended the run where the page did, as stopped, keeping the partial reply.
    conversation = context_id(leak_recorder, page)
    stopped = turns(server, conversation)[-1]
    assert (stopped["text"], stopped["stopReason"]) == (shown, "stopped")
    # One run at a time per conversation: had the first one gone on, this one would be
    # refused (context_busy) rather than answered.
    send(page, "Thanks!")
    expect(page.locator(REPLY_TEXT)).to_have_count(2)
    expect(last(page.locator(REPLY_TEXT))).to_have_text(FULL_REPLY)
    expect(page.get_by_role("alert")).to_have_count(0)
    assert turns(server, conversation)[1] == stopped
    leak_recorder.assert_no_leak(page, SECRETS)


def test_regenerate_the_latest_reply(
    page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    page.goto(server.url)
    send(page, "Where is my order?")
    reply = last(page.locator(REPLY_TEXT))
    expect(reply).to_have_text(FULL_REPLY)
    expect_status(page, "ready")
    conversation = context_id(leak_recorder, page)
    replaced = turns(server, conversation)[-1]

    watch_stream(page, REPLY_TEXT)
    with page.expect_response(lambda r: r.request.method == "POST" and r.url.endswith("/chat")):
        page.get_by_role("button", name="Regenerate").click()
    expect_status(page, "ready")  # the regenerated reply's stream is over
    expect(page.locator("li.assistant")).to_have_count(1)  # in place of the one it replaces
    expect(reply).to_have_text(FULL_REPLY)
    expect(page.get_by_role("alert")).to_have_count(0)
    # A new reply beside the first, which the server keeps: not the first streamed again,
    # as when the transport drops `trigger` and the request reads as a retried send.
    said = turns(server, conversation)
    assert [(t["role"], t["text"]) for t in said] == [
        ("user", "Where is my order?"),
        ("assistant", FULL_REPLY),
    ]
    assert said[-1]["id"] != replaced["id"]
    assert (said[-1]["siblings"], said[-1]["siblingIndex"]) == (2, 1)
    assert len(partial_texts(page, FULL_REPLY)) >= 2, "the new reply did not stream"
    leak_recorder.assert_no_leak(page, SECRETS)


def test_answer_the_agents_question(
    page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    page.goto(server.url)
    send(page, "Please refund order 1234")
    approval = page.get_by_role("region", name="Approval")
    expect(approval).to_contain_text("Refund $40 on order 1234?")
    expect(last(page.locator(REPLY_TEXT))).to_have_text(FIRST_WORDS)
    expect_status(page, "ready")

    approval.get_by_role("button", name="approve").click()  # addToolOutput, sent on its own
    expect(approval).to_have_count(0)
    answer = page.locator("li.assistant")
    expect(answer).to_have_count(1)  # the reply goes on in the message that asked
    expect(answer).to_contain_text("Refund $40 on order 1234? approve")
    expect(answer).to_contain_text("issue_refund: output-available")
    expect(last(page.locator(REPLY_TEXT))).to_have_text("Done: $40 is on its way back.")
    expect_status(page, "ready")

    said = turns(server, context_id(leak_recorder, page))
    assert [(t["text"], t["stopReason"]) for t in said[1:]] == [
        (FIRST_WORDS, "interrupted"),
        ("Done: $40 is on its way back.", "end"),
    ]
    assert said[-1]["toolCalls"] == ["issue_refund"]
    page.reload()  # the server's turns, as messages: one reply, as it was live
    expect(page.locator("li.assistant")).to_have_count(1)
    expect(page.locator(REPLY_TEXT)).to_have_text([FIRST_WORDS, "Done: $40 is on its way back."])
    leak_recorder.assert_storage_holds_only_context_ids(page)
    leak_recorder.assert_no_leak(page, SECRETS)


def test_a_refused_answer_leaves_the_question_open(
    page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    page.goto(server.url)
    send(page, "Please refund order 1234")
    approval = page.get_by_role("region", name="Approval")
    expect(approval).to_contain_text("Refund $40 on order 1234?")
    expect_status(page, "ready")

    def answer_maybe(route: Route) -> None:
        """The page's answer, made one the question does not offer, as a free-form answer
        that does not fit would be: the server refuses it (400 invalid_decision)."""
        payload = json.loads(route.request.post_data or "{}")
        for part in payload["message"]["parts"]:
            if part["type"] == "tool-interrupt":
                part["output"] = "maybe"
        route.continue_(post_data=json.dumps(payload))

    page.route("**/ai-sdk/assistant/chat", answer_maybe, times=1)
    approval.get_by_role("button", name="approve").click()
    # The server's sentence, not its JSON body.
    alert = page.get_by_role("alert")
    expect(alert).to_contain_text("The answer must be one of: approve, reject.")
    expect(alert).not_to_contain_text('"code"')
    expect(approval.get_by_role("button", name="approve")).to_be_enabled()  # asked again

    approval.get_by_role("button", name="approve").click()
    expect(last(page.locator(REPLY_TEXT))).to_have_text("Done: $40 is on its way back.")
    expect(approval).to_have_count(0)
    expect(page.get_by_role("alert")).to_have_count(0)
    said = turns(server, context_id(leak_recorder, page))
    assert [t["stopReason"] for t in said[1:]] == ["interrupted", "end"]
    leak_recorder.assert_no_leak(page, SECRETS)


def test_an_answer_another_tab_gave_first_shows_the_conversation_as_it_is(
    context: BrowserContext, page: Page, leak_recorder: LeakRecorder, server: ServerProcess
) -> None:
    page.goto(server.url)
    send(page, "Please refund order 1234")
    approval = page.get_by_role("region", name="Approval")
    expect(approval).to_contain_text("Refund $40 on order 1234?")
    expect_status(page, "ready")

    other = context.new_page()  # the same conversation, in another tab, answered there
    other.goto(server.url)
    other.get_by_role("region", name="Approval").get_by_role("button", name="approve").click()
    expect(last(other.locator(REPLY_TEXT))).to_have_text("Done: $40 is on its way back.")
    other.close()

    approval.get_by_role("button", name="reject").click()  # this tab still shows the question
    expect(page.get_by_role("alert")).to_contain_text("that question was answered already")
    # The conversation as the server keeps it: the other tab's answer and what followed.
    expect(approval).to_have_count(0)
    expect(page.locator("li.assistant")).to_contain_text("Refund $40 on order 1234? approve")
    expect(last(page.locator(REPLY_TEXT))).to_have_text("Done: $40 is on its way back.")
    expect_status(page, "ready")
    said = turns(server, context_id(leak_recorder, page))
    assert [(t["text"], t["stopReason"]) for t in said[1:]] == [
        (FIRST_WORDS, "interrupted"),
        ("Done: $40 is on its way back.", "end"),
    ]
    leak_recorder.assert_no_leak(page, SECRETS)


def test_the_recipe_in_the_docs_compiles(app: Path) -> None:
    """The ```tsx blocks of docs/interop.md marked `ai-sdk` (sketches to the docs' own
    check, which has no `ai` installed), compiled strict against this example's SDK."""
    text = (ROOT / "docs" / "interop.md").read_text(encoding="utf-8")
    found = re.findall(r"^```tsx[^\n]* ai-sdk(?: ([\w.-]+\.tsx?))?\n(.*?)^```", text, re.M | re.S)
    assert len(found) >= 2, "the recipe's blocks were not found: did the markers change?"
    check = app / "docs-check"
    check.mkdir(exist_ok=True)
    for index, (name, code) in enumerate(found):
        (check / (name or f"block-{index}.tsx")).write_text(code, encoding="utf-8")
    config = {"extends": "../tsconfig.app.json", "include": ["."]}
    (check / "tsconfig.json").write_text(json.dumps(config))
    done = subprocess.run(
        ["node_modules/.bin/tsc", "-p", "docs-check", "--pretty", "false"],
        cwd=app,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
