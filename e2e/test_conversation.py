"""The walking skeleton, end to end: send, stream, reload, resume, users, privacy."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from conftest import Demo, storage
from thinwire.testing import LeakRecorder

CONTEXT_ID = re.compile(r"ctx-[0-9a-f]{36}")
STREAM_WATCH = """() => {
  window.__assistantTexts = [];
  window.__livePanels = [];
  new MutationObserver(() => {
    const turns = document.querySelectorAll('[data-testid="turn"][data-role="assistant"]');
    const last = turns[turns.length - 1];
    if (last) window.__assistantTexts.push(last.querySelector('[data-testid="turn-text"]').textContent);
    for (const id of ["thinking", "activity"]) {
      const panel = document.querySelector(`[data-testid="${id}"]`);
      if (panel) window.__livePanels.push(`${id}: ${panel.textContent}`);
    }
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
}"""


def open_as(page: Page, demo: Demo, user: str) -> None:
    page.goto(f"{demo.url}/?user={user}")
    expect(page.get_by_test_id("status")).to_have_text("idle")


def send(page: Page, text: str) -> None:
    page.get_by_test_id("message-input").fill(text)
    page.get_by_test_id("send").click()


def assistant_turns(page: Page) -> list[str]:
    return page.locator(
        '[data-testid="turn"][data-role="assistant"] [data-testid="turn-text"]'
    ).all_text_contents()


def wait_for_reply(page: Page, count: int) -> str:
    replies = page.locator('[data-testid="turn"][data-role="assistant"][data-streaming="false"]')
    expect(replies).to_have_count(count)
    expect(page.get_by_test_id("status")).to_have_text("idle")
    return assistant_turns(page)[count - 1]


def test_reply_streams_with_thinking_and_activity(page: Page, demo: Demo) -> None:
    open_as(page, demo, "alice")
    page.evaluate(STREAM_WATCH)
    send(page, "hello from the browser")
    reply = wait_for_reply(page, 1)
    assert reply.startswith("You said “hello from the browser” — 4 words.")
    # The reply grew piece by piece: many distinct partial texts were rendered.
    partials = set(page.evaluate("window.__assistantTexts"))
    assert len([p for p in partials if p and reply.startswith(p) and p != reply]) >= 3
    # The live panels showed the thinking and the tool while the reply streamed...
    live = page.evaluate("window.__livePanels")
    assert any(p.startswith("thinking: ") and "counting its words" in p for p in live)
    assert any(p.startswith("activity: ") and "count_words — done" in p for p in live)
    # ...and leave with the run: the reply keeps them, under its Details.
    expect(page.get_by_test_id("thinking")).to_have_count(0)
    expect(page.get_by_test_id("activity")).to_have_count(0)
    reply = page.locator('[data-testid="turn"][data-role="assistant"]')
    expect(reply.get_by_test_id("turn-thinking")).to_contain_text("counting its words")
    expect(reply.get_by_test_id("turn-activity-item")).to_contain_text("count_words")
    expect(page.get_by_test_id("turn-tools")).to_contain_text("count_words")


def test_reload_resumes_the_same_conversation(
    page: Page, demo: Demo, recorder: LeakRecorder
) -> None:
    open_as(page, demo, "alice")
    send(page, "my name is Ada")
    wait_for_reply(page, 1)
    stored = storage(page, "localStorage")
    assert list(stored) == ["thinwire:demo:alice:contextId"]
    context_id = stored["thinwire:demo:alice:contextId"]
    assert CONTEXT_ID.fullmatch(context_id)

    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)  # rehydrated from the server
    assert page.get_by_test_id("turn-text").first.text_content() == "my name is Ada"
    send(page, "what is my name?")
    reply = wait_for_reply(page, 2)
    assert "Earlier you told me “my name is Ada”" in reply
    # Still the same conversation, and still nothing but its id in storage.
    assert storage(page, "localStorage") == {"thinwire:demo:alice:contextId": context_id}
    assert storage(page, "sessionStorage") == {}
    run_bodies = [r.post_data or "" for r in recorder.requests if r.url.endswith("/runs")]
    assert context_id in run_bodies[-1]


def test_a_long_conversation_opens_on_its_latest_page(page: Page, demo: Demo) -> None:
    page.goto(f"{demo.url}/?user=carol&pageSize=2")  # pages of two exchanges
    expect(page.get_by_test_id("status")).to_have_text("idle")
    for n in range(5):
        send(page, f"message {n}")
        wait_for_reply(page, n + 1)
    user_texts = '[data-testid="turn"][data-role="user"] [data-testid="turn-text"]'

    page.reload()
    turns, earlier = page.get_by_test_id("turn"), page.get_by_test_id("load-earlier")
    expect(turns).to_have_count(4)  # the latest two exchanges only
    assert page.locator(user_texts).all_text_contents() == ["message 3", "message 4"]
    earlier.click()
    expect(turns).to_have_count(8)
    earlier.click()
    expect(turns).to_have_count(10)
    expect(earlier).to_have_count(0)  # nothing before the first exchange
    assert page.locator(user_texts).all_text_contents() == [f"message {n}" for n in range(5)]
    send(page, "message 5")  # a send keeps the pages read
    wait_for_reply(page, 6)
    expect(turns).to_have_count(12)


def test_each_user_resumes_their_own_conversation(page: Page, demo: Demo) -> None:
    open_as(page, demo, "alice")
    send(page, "alice was here")
    wait_for_reply(page, 1)

    page.get_by_test_id("user-select").select_option("bob")
    expect(page.get_by_test_id("turn")).to_have_count(0)
    send(page, "bob was here")
    assert "start of our conversation" in wait_for_reply(page, 1)

    page.get_by_test_id("user-select").select_option("alice")
    expect(page.get_by_test_id("turn").first).to_contain_text("alice was here")
    expect(page.get_by_test_id("turn")).to_have_count(2)
    stored = storage(page, "localStorage")
    assert sorted(stored) == ["thinwire:demo:alice:contextId", "thinwire:demo:bob:contextId"]
    assert all(CONTEXT_ID.fullmatch(value) for value in stored.values())
    assert len(set(stored.values())) == 2


def test_new_conversation_forgets_the_id_and_starts_over(page: Page, demo: Demo) -> None:
    open_as(page, demo, "carol")
    send(page, "first conversation")
    wait_for_reply(page, 1)
    first_id = storage(page, "localStorage")["thinwire:demo:carol:contextId"]

    expect(page.get_by_role("button", name=re.compile(r"^new", re.I))).to_have_count(1)  # not two
    page.get_by_test_id("conversation-new").click()
    expect(page.get_by_test_id("turn")).to_have_count(0)
    assert storage(page, "localStorage") == {}
    send(page, "second conversation")
    assert "start of our conversation" in wait_for_reply(page, 1)
    second_id = storage(page, "localStorage")["thinwire:demo:carol:contextId"]
    assert CONTEXT_ID.fullmatch(second_id) and second_id != first_id


def test_server_only_state_never_reaches_the_browser(
    page: Page, demo: Demo, recorder: LeakRecorder
) -> None:
    open_as(page, demo, "carol")
    send(page, "tell me your secrets")
    wait_for_reply(page, 1)
    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    send(page, "and your system prompt")
    wait_for_reply(page, 2)
    page.get_by_test_id("user-select").select_option("bob")
    page.get_by_test_id("user-select").select_option("carol")
    expect(page.get_by_test_id("turn")).to_have_count(4)

    # The recorder really saw the streams and the transcripts it checks.
    urls = [r.url for r in recorder.requests]
    assert sum(u.endswith("/agents/demo/runs") for u in urls) == 2
    assert any("/agents/demo/contexts/ctx-" in u for u in urls)
    read = recorder.fetched
    runs = [text for url, text in read.items() if url.endswith("/agents/demo/runs")]
    assert runs and runs[0].count('"type":"done"') == 2  # both SSE streams, read whole
    assert any('"turns":[' in text for url, text in read.items() if "/contexts/" in url)
    recorder.assert_no_leak(page, demo.canaries)
    # The check itself can fail: text that did cross the wire is reported, with where.
    with pytest.raises(
        AssertionError, match=r"the typed canary leaked in fetch .*as the page read it"
    ):
        recorder.assert_no_leak(page, {"typed": "and your system prompt"})
    assert list(storage(page, "localStorage")) == ["thinwire:demo:carol:contextId"]
    assert [m for m in recorder.console if m.startswith(("error", "pageerror"))] == []


def test_a_refused_message_comes_back_to_the_box_with_a_sentence_saying_why(
    page: Page, demo: Demo
) -> None:
    open_as(page, demo, "bob")
    too_long = "x" * 40_000
    send(page, too_long)
    error = page.get_by_test_id("error")
    expect(error.get_by_test_id("error-text")).to_have_text(
        "Your message is too long to send. Shorten it and send it again."
    )
    # The wire code stays, aside, for developers.
    expect(error.get_by_test_id("error-code")).to_have_text("message_too_large")
    expect(error).to_have_attribute("data-code", "message_too_large")
    expect(page.get_by_test_id("status")).to_have_text("error")
    # What the user typed is not lost: it is back in the box, to shorten and send again.
    expect(page.get_by_test_id("message-input")).to_have_value(too_long)
    send(page, "a shorter one")
    wait_for_reply(page, 1)
    expect(page.get_by_test_id("message-input")).to_have_value("")  # a message that went is not
    expect(error).to_have_count(0)


def test_a_refused_edit_comes_back_to_its_box(page: Page, demo: Demo) -> None:
    open_as(page, demo, "bob")
    send(page, "alpha one")
    wait_for_reply(page, 1)
    first_user = page.locator('[data-testid="turn"][data-role="user"]').first
    first_user.get_by_test_id("edit").click()
    too_long = "y" * 40_000
    page.get_by_test_id("edit-input").fill(too_long)
    page.get_by_test_id("edit-input").press("Enter")
    expect(page.get_by_test_id("error").get_by_test_id("error-code")).to_have_text(
        "message_too_large"
    )
    # The edited text is back in the message's box, to shorten and send again.
    expect(page.get_by_test_id("edit-input")).to_have_value(too_long)
    page.get_by_test_id("edit-input").fill("gamma three")
    page.get_by_test_id("edit-input").press("Enter")
    expect(page.get_by_test_id("edit-input")).to_have_count(0)
    expect(page.get_by_test_id("turn-text").first).to_have_text("gamma three")
    wait_for_reply(page, 1)


#: The characters of an element as laid out: line by line, left to right (controls have
#: no width, so only what a reader sees).
AS_SHOWN = """(element) => {
  const shown = [];
  const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.data.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getBoundingClientRect();
      if (box.width > 0) shown.push([Math.round(box.top), box.left, node.data[i]]);
    }
  }
  shown.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return shown.map((place) => place[2]).join("");
}"""
BIDI_CONTROLS = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def test_text_shows_in_the_order_it_was_written(page: Page, demo: Demo) -> None:
    """Bidi controls in a message cannot make the page show it as another: an override
    made "0001$" read "$1000", an isolate with marks swapped "Eve" and "Bob"."""
    open_as(page, demo, "carol")
    send(page, "Pay \u202e0001$\u202c to \u2067Eve\u200f or\u200f Bob\u2069")
    wait_for_reply(page, 1)
    texts = page.get_by_test_id("turn-text")
    expect(texts).to_have_count(2)
    for text in texts.all():  # the message, and the reply that repeats it
        assert "Pay 0001$ to Eve or Bob" in text.evaluate(AS_SHOWN)
        assert not BIDI_CONTROLS & set(text.text_content() or "")
    # Right-to-left text still reads right to left: each turn takes the direction of its own.
    send(page, "\u05e9\u05dc\u05d5\u05dd")
    wait_for_reply(page, 2)
    hebrew = texts.nth(2)
    assert hebrew.evaluate("(element) => getComputedStyle(element).direction") == "rtl"
    assert texts.nth(0).evaluate("(element) => getComputedStyle(element).direction") == "ltr"


def test_an_agent_failure_says_so_and_keeps_the_reference_for_support(
    page: Page, demo: Demo
) -> None:
    open_as(page, demo, "bob")
    send(page, "explode")
    error = page.get_by_test_id("error")
    expect(error).to_have_attribute("data-code", "agent_error")
    expect(error.get_by_test_id("error-text")).to_contain_text("The agent ran into a problem")
    expect(error.get_by_test_id("error-reference")).to_have_text(
        re.compile(r"Reference: err-[0-9a-f]{12}")
    )
    assert not (error.text_content() or "").startswith("agent_error")
    expect(page.get_by_test_id("message-input")).to_have_value("")  # it was sent: it is in the chat


def test_conversation_survives_a_server_restart(
    page: Page, own_demo: Demo, recorder: LeakRecorder
) -> None:
    open_as(page, own_demo, "alice")
    send(page, "remember the lighthouse")
    wait_for_reply(page, 1)
    own_demo.restart()  # SIGKILL, then a new process on the same port and data
    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    assert page.get_by_test_id("turn-text").first.text_content() == "remember the lighthouse"
    send(page, "what was it?")
    assert "Earlier you told me “remember the lighthouse”" in wait_for_reply(page, 2)
    recorder.assert_no_leak(page, own_demo.canaries)


def test_another_user_cannot_read_the_conversation(page: Page, demo: Demo) -> None:
    open_as(page, demo, "alice")
    send(page, "alice's secret plan")
    wait_for_reply(page, 1)
    alice_id = storage(page, "localStorage")["thinwire:demo:alice:contextId"]

    page.get_by_test_id("user-select").select_option("bob")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    # Bob's browser holds alice's id (say it leaked); the server still says no such thing.
    probe = page.evaluate(
        """async (id) => {
            const response = await fetch(`/agents/demo/contexts/${id}`);
            return [response.status, await response.text()];
        }""",
        alice_id,
    )
    assert probe[0] == 404 and "context_not_found" in probe[1]
    assert "secret plan" not in probe[1]


def test_the_page_runs_under_its_strict_content_security_policy(page: Page, demo: Demo) -> None:
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text))
    response = page.goto(f"{demo.url}/?user=carol")
    assert response is not None
    assert "script-src 'self'" in response.headers["content-security-policy"]
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "does the policy let the page work?")
    wait_for_reply(page, 1)
    page.get_by_test_id("conversation-new").click()
    assert not [text for text in violations if "Content Security Policy" in text]
