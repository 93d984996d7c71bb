"""Streams that survive, in a real browser: reload mid-stream, tabs and browsers of one user,
stop, WebSocket."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from conftest import Demo
from proxy import proxy_to
from test_conversation import assistant_turns, open_as, send, wait_for_reply
from thinwire.testing import LeakRecorder

STREAMING_REPLY = (
    '[data-testid="turn"][data-role="assistant"][data-streaming="true"] [data-testid="turn-text"]'
)


def expected_first_reply(text: str) -> str:
    words = len(text.split())
    return f"You said “{text}” — {words} words. This is the start of our conversation."


def wait_for_partial_reply(page: Page) -> str:
    """Wait until the reply has started streaming, and return what is shown of it."""
    page.wait_for_function(
        f"() => (document.querySelector('{STREAMING_REPLY}')?.textContent ?? '').length > 0",
        polling=50,  # not per animation frame: a background tab has none
    )
    return page.locator(STREAMING_REPLY).text_content() or ""


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_reload_mid_stream_gives_the_text_of_an_uninterrupted_run(
    page: Page, slow_demo: Demo, transport: str
) -> None:
    page.goto(f"{slow_demo.url}/?user=alice&transport={transport}")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "a reply worth waiting for")
    partial = wait_for_partial_reply(page)
    page.reload()
    final = wait_for_reply(page, 1)
    assert final == expected_first_reply("a reply worth waiting for")
    assert final.startswith(partial) and partial != final
    assert page.get_by_test_id("turn-text").first.text_content() == "a reply worth waiting for"


def test_a_second_tab_watches_the_live_run(
    context: BrowserContext, page: Page, slow_demo: Demo
) -> None:
    open_as(page, slow_demo, "alice")
    send(page, "shared between tabs")
    wait_for_partial_reply(page)
    second = context.new_page()
    second.goto(f"{slow_demo.url}/?user=alice")
    expect(second.get_by_test_id("status")).to_have_text("streaming")  # attached, not idle
    expect(second.get_by_test_id("stop")).to_be_enabled()
    assert wait_for_reply(second, 1) == wait_for_reply(page, 1)
    assert wait_for_reply(page, 1) == expected_first_reply("shared between tabs")


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_tabs_of_one_user_follow_each_others_runs_and_lists(
    context: BrowserContext, page: Page, slow_demo: Demo, transport: str
) -> None:
    url = f"{slow_demo.url}/?user=alice&transport={transport}"
    page.goto(url)
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "first")
    wait_for_reply(page, 1)
    second = context.new_page()
    second.goto(url)
    expect(second.get_by_test_id("turn")).to_have_count(2)

    send(page, "a long second question")
    wait_for_partial_reply(page)
    # The second tab follows the run as it streams: no reload, no refusal.
    expect(second.get_by_test_id("status")).to_have_text("streaming")
    assert wait_for_reply(second, 2) == wait_for_reply(page, 2)
    assert (
        second.get_by_test_id("turn-text").all_text_contents()
        == page.get_by_test_id("turn-text").all_text_contents()
    )
    expect(second.get_by_test_id("conversation-preview").first).to_contain_text(
        "a long second question"
    )
    # Its next message goes at the first try, and the first tab follows that one.
    send(second, "from the second tab")
    assert "“from the second tab”" in wait_for_reply(second, 3)
    expect(second.get_by_test_id("error")).to_have_count(0)
    assert wait_for_reply(page, 3) == wait_for_reply(second, 3)

    # A rename in one tab shows in the other's list.
    page.get_by_test_id("conversation-rename").first.click()
    page.get_by_test_id("conversation-title-input").fill("Shared plans")
    page.get_by_test_id("conversation-title-input").press("Enter")
    expect(second.get_by_test_id("conversation-title").first).to_have_text("Shared plans")


def test_a_send_from_another_browser_during_a_run_is_context_busy(
    page: Page, slow_demo: Demo, thinwire_browser: Browser
) -> None:
    open_as(page, slow_demo, "alice")
    send(page, "first")
    wait_for_reply(page, 1)
    phone = thinwire_browser.new_context()  # another device: no tab tells it of the run
    try:
        second = phone.new_page()
        open_as(second, slow_demo, "alice")
        second.get_by_test_id("conversation-select").first.click()
        expect(second.get_by_test_id("turn")).to_have_count(2)
        send(page, "a long second question")
        wait_for_partial_reply(page)
        send(second, "me too")  # the second browser has not seen the run start
        error = second.get_by_test_id("error")
        expect(error).to_have_attribute("data-code", "context_busy")
        expect(error.get_by_test_id("error-text")).to_have_text(
            "Another tab is replying in this conversation. Wait for it to finish, then send again."
        )
        expect(second.get_by_test_id("message-input")).to_have_value("me too")  # not lost
        assert wait_for_reply(page, 2).startswith("You said “a long second question”")
    finally:
        phone.close()


def test_a_send_from_a_browser_that_missed_a_message_comes_back_to_its_box(
    page: Page, demo: Demo, thinwire_browser: Browser
) -> None:
    open_as(page, demo, "bob")
    send(page, "first")
    wait_for_reply(page, 1)
    phone = thinwire_browser.new_context()  # the same conversation, on another device
    try:
        second = phone.new_page()
        open_as(second, demo, "bob")
        second.get_by_test_id("conversation-select").first.click()
        expect(second.get_by_test_id("turn")).to_have_count(2)
        send(page, "said in the first tab")
        wait_for_reply(page, 2)
        expect(page.get_by_test_id("message-input")).to_have_value("")  # it went: not restored

        send(second, "said in the stale tab")  # follows a turn the conversation moved on from
        error = second.get_by_test_id("error")
        expect(error).to_have_attribute("data-code", "branch_moved")
        expect(error.get_by_test_id("error-text")).to_have_text(
            "This conversation changed in another tab. It has been reloaded: send your message again."
        )
        expect(second.get_by_test_id("turn")).to_have_count(4)  # reloaded
        expect(second.get_by_test_id("message-input")).to_have_value("said in the stale tab")
        second.get_by_test_id("send").click()
        assert "said in the stale tab" in wait_for_reply(second, 3)
        expect(second.get_by_test_id("message-input")).to_have_value("")
    finally:
        phone.close()


def test_stop_ends_the_reply_on_the_server(page: Page, slow_demo: Demo) -> None:
    open_as(page, slow_demo, "alice")
    send(page, "please stop me halfway")
    wait_for_partial_reply(page)
    page.get_by_test_id("stop").click()
    ending = page.get_by_test_id("turn-ending")
    expect(ending).to_have_attribute("data-stop-reason", "stopped")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    stopped = assistant_turns(page)[0]
    full = expected_first_reply("please stop me halfway")
    assert full.startswith(stopped) and stopped != full
    page.reload()  # the server kept the partial reply, marked as stopped
    expect(page.get_by_test_id("turn-ending")).to_have_attribute("data-stop-reason", "stopped")
    assert assistant_turns(page)[0] == stopped


def test_escape_in_the_message_box_stops_the_reply(page: Page, slow_demo: Demo) -> None:
    open_as(page, slow_demo, "alice")
    send(page, "please stop me with the keyboard")
    wait_for_partial_reply(page)
    page.get_by_test_id("message-input").press("Escape")
    ending = page.get_by_test_id("turn-ending")
    expect(ending).to_have_attribute("data-stop-reason", "stopped")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    stopped = assistant_turns(page)[0]
    assert expected_first_reply("please stop me with the keyboard") != stopped


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_a_dropped_connection_reconnects_without_losing_a_word(
    page: Page, slow_demo: Demo, transport: str
) -> None:
    assert slow_demo.server is not None
    with proxy_to(slow_demo.server.port) as proxy:
        page.goto(f"{proxy.url}/?user=alice&transport={transport}")
        expect(page.get_by_test_id("status")).to_have_text("idle")
        statuses = watch_statuses(page)
        send(page, "through the tunnel")
        wait_for_partial_reply(page)
        proxy.cut()  # the network drops the stream; the server's run goes on
        assert wait_for_reply(page, 1) == expected_first_reply("through the tunnel")
        assert "reconnecting" in page.evaluate(statuses)


def watch_statuses(page: Page) -> str:
    """Record every status the page shows; returns the script that reads them back."""
    page.evaluate(
        """() => {
            window.__statuses = [];
            const status = document.querySelector('[data-testid="status"]');
            new MutationObserver(() => window.__statuses.push(status.textContent))
                .observe(status, { subtree: true, childList: true, characterData: true });
        }"""
    )
    return "window.__statuses"


def test_websocket_conversation_leaks_nothing(
    page: Page, demo: Demo, recorder: LeakRecorder
) -> None:
    page.goto(f"{demo.url}/?user=carol&transport=websocket")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "over the socket")
    wait_for_reply(page, 1)
    send(page, "and again")
    assert "Earlier you told me “over the socket”" in wait_for_reply(page, 2)
    assert any('"type":"done"' in frame for frame in recorder.websocket_frames)
    recorder.assert_no_leak(page, demo.canaries)


def test_a_plain_event_source_can_follow_a_run(page: Page, slow_demo: Demo) -> None:
    open_as(page, slow_demo, "alice")
    send(page, "for any client")
    wait_for_partial_reply(page)
    context_id = page.evaluate("localStorage.getItem('thinwire:demo:alice:contextId')")
    frames = page.evaluate(
        """(id) => new Promise((resolve, reject) => {
            const frames = [];
            const source = new EventSource(`/agents/demo/contexts/${id}/events`);
            source.onmessage = (event) => {
                const frame = JSON.parse(event.data);
                frames.push([Number(event.lastEventId), frame]);
                if (frame.type === "done") { source.close(); resolve(frames); }
            };
            setTimeout(() => { source.close(); reject(new Error("no done")); }, 15000);
        })""",
        context_id,
    )
    assert [seq for seq, frame in frames] == [frame["seq"] for _, frame in frames]
    assert frames[0][1]["type"] == "run_start" and frames[-1][1]["text"] == wait_for_reply(page, 1)
