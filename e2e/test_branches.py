"""Conversations and branches in a real browser: the sidebar of a user's conversations
(switch, reload, rename, forget), regenerate, edit and the branch arrows — and whose
conversations they are: another user sees none, another browser of the same user all.

The demo agent is deterministic (it quotes the first message of the branch and counts
words), so a regenerated reply has the same text as the one it replaces: these tests tell
replies apart by their turn ids (`data-turn-id`) and sibling positions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from conftest import Demo, storage
from test_conversation import CONTEXT_ID, open_as, send, wait_for_reply
from thinwire.testing import LeakRecorder

TURN_ID = re.compile(r"turn-[0-9a-f]{12}-[ua][0-9]{1,4}")
USER_TURNS = '[data-testid="turn"][data-role="user"]'
REPLIES = '[data-testid="turn"][data-role="assistant"]'


def key(user: str) -> str:
    return f"thinwire:demo:{user}:contextId"


def first_reply(text: str) -> str:
    words = len(text.split())
    return f"You said “{text}” — {words} words. This is the start of our conversation."


def items(page: Page) -> Locator:
    return page.get_by_test_id("conversation-item")


def item_with(page: Page, text: str) -> Locator:
    return items(page).filter(has_text=text)


def selected_item(page: Page) -> Locator:
    return page.locator('[data-testid="conversation-item"][data-selected="true"]')


def listed_ids(page: Page) -> list[str]:
    ids: list[str] = items(page).evaluate_all("items => items.map(i => i.dataset.contextId)")
    return ids


def turn_ids(page: Page) -> list[str]:
    ids: list[str] = page.get_by_test_id("turn").evaluate_all("ts => ts.map(t => t.dataset.turnId)")
    return ids


def new_conversation(page: Page, text: str) -> str:
    """Starts a conversation from the sidebar, waits for its reply; returns its id."""
    page.get_by_test_id("conversation-new").click()
    expect(page.get_by_test_id("turn")).to_have_count(0)
    send(page, text)
    wait_for_reply(page, 1)
    context_id: str = storage(page, "localStorage")[key(user_of(page))]
    expect(items(page).first).to_have_attribute("data-context-id", context_id)
    return context_id


def user_of(page: Page) -> str:
    user = re.search(r"[?&]user=(\w+)", page.url)
    assert user, page.url
    return user.group(1)


def call(page: Page, method: str, path: str, body: Any = None) -> tuple[int, str]:
    """A request from the page, with its cookies: what this user's browser may do."""
    status, text = page.evaluate(
        """async ([method, path, body]) => {
            const init = { method, headers: { "content-type": "application/json" } };
            if (body !== null) init.body = JSON.stringify(body);
            const response = await fetch(path, init);
            return [response.status, await response.text()];
        }""",
        [method, path, body],
    )
    return status, text


def test_two_conversations_switch_and_survive_a_reload(page: Page, own_demo: Demo) -> None:
    open_as(page, own_demo, "alice")
    expect(items(page)).to_have_count(0)
    first = new_conversation(page, "lighthouse keeper notes")
    expect(items(page)).to_have_count(1)
    second = new_conversation(page, "orchard harvest plan")
    assert CONTEXT_ID.fullmatch(first) and CONTEXT_ID.fullmatch(second) and first != second
    # Most recently active first; the one shown is selected.
    expect(items(page)).to_have_count(2)
    assert listed_ids(page) == [second, first]
    expect(selected_item(page)).to_have_attribute("data-context-id", second)

    item_with(page, "lighthouse keeper notes").get_by_test_id("conversation-select").click()
    expect(page.get_by_test_id("turn-text").first).to_have_text("lighthouse keeper notes")
    expect(page.get_by_test_id("turn")).to_have_count(2)
    expect(selected_item(page)).to_have_attribute("data-context-id", first)
    assert storage(page, "localStorage") == {key("alice"): first}  # the selection, nothing else

    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    expect(page.get_by_test_id("turn-text").first).to_have_text("lighthouse keeper notes")
    expect(items(page)).to_have_count(2)
    expect(selected_item(page)).to_have_attribute("data-context-id", first)
    # A past reply still shows what it showed while it streamed.
    reply = page.locator(REPLIES).first
    reply.get_by_test_id("turn-detail").locator("summary").click()
    expect(reply.get_by_test_id("turn-thinking")).to_contain_text("counting its words")
    expect(reply.get_by_test_id("turn-activity-item")).to_have_count(1)
    expect(reply.get_by_test_id("turn-activity-item")).to_contain_text("count_words")
    expect(reply.get_by_test_id("turn-activity-item")).to_have_attribute("data-state", "ok")

    item_with(page, "orchard harvest plan").get_by_test_id("conversation-select").click()
    expect(page.get_by_test_id("turn-text").first).to_have_text("orchard harvest plan")
    assert storage(page, "localStorage") == {key("alice"): second}
    assert storage(page, "sessionStorage") == {}


def test_a_rename_is_kept_by_the_server(page: Page, own_demo: Demo) -> None:
    open_as(page, own_demo, "alice")
    new_conversation(page, "please rename me")
    item = items(page).first
    item.get_by_test_id("conversation-rename").click()
    page.get_by_test_id("conversation-title-input").fill("Lighthouse plans")
    page.get_by_test_id("conversation-title-input").press("Enter")
    expect(items(page).first.get_by_test_id("conversation-title")).to_have_text("Lighthouse plans")
    expect(page.get_by_test_id("conversation-heading")).to_have_text("Lighthouse plans")

    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    expect(items(page).first.get_by_test_id("conversation-title")).to_have_text("Lighthouse plans")
    expect(page.get_by_test_id("conversation-heading")).to_have_text("Lighthouse plans")
    # The server refuses a title over 200 characters, with its typed error.
    context_id = storage(page, "localStorage")[key("alice")]
    status, text = call(page, "PATCH", f"/agents/demo/contexts/{context_id}", {"title": "x" * 201})
    assert status == 400 and "title_too_long" in text


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_regenerate_keeps_the_old_reply_as_a_sibling(
    page: Page, demo: Demo, recorder: LeakRecorder, transport: str
) -> None:
    page.goto(f"{demo.url}/?user=carol&transport={transport}")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "count these words please")
    text = wait_for_reply(page, 1)
    assert text == first_reply("count these words please")
    reply = page.locator(REPLIES).first
    first_id = reply.get_attribute("data-turn-id")
    assert first_id and TURN_ID.fullmatch(first_id)
    expect(page.get_by_test_id("branch-position")).to_have_count(0)

    page.get_by_test_id("regenerate").click()
    expect(reply).not_to_have_attribute("data-turn-id", first_id)  # the old reply left the view
    assert wait_for_reply(page, 1) == text  # the same words: a deterministic agent
    expect(page.get_by_test_id("branch-position")).to_have_text("2/2")
    second_id = reply.get_attribute("data-turn-id")
    assert second_id and TURN_ID.fullmatch(second_id) and second_id != first_id
    expect(page.get_by_test_id("turn")).to_have_count(2)

    page.get_by_test_id("branch-prev").click()
    expect(page.get_by_test_id("branch-position")).to_have_text("1/2")
    expect(reply).to_have_attribute("data-turn-id", first_id)
    expect(page.get_by_test_id("branch-prev")).to_be_disabled()

    # The branch shown is the server's: a reload shows the same one, with the same ids.
    ids = turn_ids(page)
    page.reload()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    expect(page.get_by_test_id("branch-position")).to_have_text("1/2")
    assert turn_ids(page) == ids
    page.get_by_test_id("branch-next").click()
    expect(reply).to_have_attribute("data-turn-id", second_id)
    expect(page.get_by_test_id("branch-position")).to_have_text("2/2")
    recorder.assert_no_leak(page, demo.canaries)
    assert [m for m in recorder.console if m.startswith(("error", "pageerror"))] == []


@pytest.mark.parametrize("transport", ["sse", "websocket"])
def test_edit_forks_and_the_arrows_bring_the_old_branch_back(
    page: Page, demo: Demo, recorder: LeakRecorder, transport: str
) -> None:
    page.goto(f"{demo.url}/?user=bob&transport={transport}")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "alpha one")
    wait_for_reply(page, 1)
    send(page, "beta two")
    assert "Earlier you told me “alpha one”" in wait_for_reply(page, 2)
    original = turn_ids(page)
    assert len(original) == 4 and all(TURN_ID.fullmatch(i) for i in original)

    first_user = page.locator(USER_TURNS).first
    first_user.get_by_test_id("edit").click()
    page.get_by_test_id("edit-input").fill("gamma three")
    page.get_by_test_id("edit-input").press("Escape")  # cancels, as a rename does
    expect(page.get_by_test_id("edit-input")).to_have_count(0)
    expect(page.get_by_test_id("turn-text").first).to_have_text("alpha one")
    assert turn_ids(page) == original
    first_user.get_by_test_id("edit").click()
    edit_box = page.get_by_test_id("edit-input")
    edit_box.fill("  gamma")
    edit_box.press("Shift+Enter")  # a new line, as in the composer
    expect(edit_box).to_have_value("  gamma\n")
    edit_box.fill("  gamma three \n")
    edit_box.press("End")
    edit_box.press("Enter")  # sends, as the composer does; the text trimmed
    # The turns after the edited one left the view; the new branch starts over.
    expect(page.get_by_test_id("turn")).to_have_count(2)
    assert wait_for_reply(page, 1) == first_reply("gamma three")
    expect(page.get_by_test_id("turn-text").first).to_have_text("gamma three")
    expect(first_user.get_by_test_id("branch-position")).to_have_text("2/2")
    edited = turn_ids(page)
    assert edited[0] != original[0]

    first_user.get_by_test_id("branch-prev").click()
    expect(page.get_by_test_id("turn")).to_have_count(4)
    expect(first_user.get_by_test_id("branch-position")).to_have_text("1/2")
    assert turn_ids(page) == original
    expect(page.get_by_test_id("turn-text").first).to_have_text("alpha one")

    first_user.get_by_test_id("branch-next").click()
    expect(page.get_by_test_id("turn")).to_have_count(2)
    assert turn_ids(page) == edited
    # The edited branch goes on with its own history.
    send(page, "delta four")
    assert "Earlier you told me “gamma three”" in wait_for_reply(page, 2)
    recorder.assert_no_leak(page, demo.canaries)


def test_forget_removes_the_conversation_and_resets_the_chat(
    page: Page, own_demo: Demo, recorder: LeakRecorder
) -> None:
    open_as(page, own_demo, "alice")
    kept = new_conversation(page, "keep this one")
    forgotten = new_conversation(page, "forget this one")
    expect(items(page)).to_have_count(2)

    # The delete button asks first; Escape (or No) keeps the conversation.
    selected_item(page).get_by_test_id("conversation-forget").click()
    prompt = selected_item(page).get_by_test_id("conversation-forget-prompt")
    expect(prompt).to_contain_text("Delete?")
    prompt.get_by_test_id("conversation-forget-cancel").press("Escape")
    expect(prompt).to_have_count(0)
    selected_item(page).get_by_test_id("conversation-forget").click()
    prompt.get_by_test_id("conversation-forget-cancel").click()
    expect(prompt).to_have_count(0)
    expect(items(page)).to_have_count(2)
    expect(page.get_by_test_id("turn")).to_have_count(2)
    status, _ = call(page, "GET", f"/agents/demo/contexts/{forgotten}")
    assert status == 200

    selected_item(page).get_by_test_id("conversation-forget").click()
    prompt.get_by_test_id("conversation-forget-confirm").click()
    expect(items(page)).to_have_count(1)
    expect(page.get_by_test_id("turn")).to_have_count(0)
    assert storage(page, "localStorage") == {}
    status, text = call(page, "GET", f"/agents/demo/contexts/{forgotten}")
    assert status == 404 and "context_not_found" in text

    page.reload()
    expect(items(page)).to_have_count(1)
    assert listed_ids(page) == [kept]
    expect(page.get_by_test_id("turn")).to_have_count(0)
    recorder.assert_no_leak(page, own_demo.canaries)


def test_another_user_sees_none_of_them(page: Page, own_demo: Demo) -> None:
    open_as(page, own_demo, "alice")
    alice = [new_conversation(page, "alice's first"), new_conversation(page, "alice's second")]

    page.get_by_test_id("user-select").select_option("bob")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    send(page, "bob's own")
    wait_for_reply(page, 1)
    expect(items(page)).to_have_count(1)  # his own, and only that
    expect(items(page).first).to_contain_text("bob's own")
    status, text = call(page, "GET", "/agents/demo/contexts?limit=100")
    assert status == 200 and not any(context_id in text for context_id in alice)
    # Alice's conversations answer bob exactly like ones that do not exist.
    for context_id in alice:
        base = f"/agents/demo/contexts/{context_id}"
        for method, path, body in [
            ("GET", base, None),
            ("PATCH", base, {"title": "mine now"}),
            ("POST", f"{base}/regenerate", {}),
            ("POST", f"{base}/branch", {"turnId": "turn-000000000000-u1", "index": 0}),
            ("DELETE", base, None),
        ]:
            status, text = call(page, method, path, body)
            assert status == 404 and "context_not_found" in text, (method, path, status, text)

    page.get_by_test_id("user-select").select_option("alice")
    expect(items(page)).to_have_count(2)
    assert sorted(listed_ids(page)) == sorted(alice)


def test_a_second_browser_of_the_same_user_sees_them_all(
    page: Page, own_demo: Demo, thinwire_browser: Browser
) -> None:
    open_as(page, own_demo, "alice")
    first = new_conversation(page, "written on the laptop")
    second = new_conversation(page, "also on the laptop")

    phone = thinwire_browser.new_context()  # its own cookies and storage
    try:
        other = phone.new_page()
        other.set_default_timeout(10_000)
        open_as(other, own_demo, "alice")
        expect(items(other)).to_have_count(2)
        assert listed_ids(other) == [second, first]
        # Its own storage holds no id: it starts a new conversation, and can open any.
        expect(other.get_by_test_id("turn")).to_have_count(0)
        item_with(other, "written on the laptop").get_by_test_id("conversation-select").click()
        expect(other.get_by_test_id("turn-text").first).to_have_text("written on the laptop")
        assert storage(other, "localStorage") == {key("alice"): first}
        # What one browser does, the other sees on its next look.
        send(other, "and now on the phone")
        assert "Earlier you told me “written on the laptop”" in wait_for_reply(other, 2)
        page.reload()
        expect(items(page)).to_have_count(2)
        assert listed_ids(page) == [first, second]  # the phone's reply made it the most recent
    finally:
        phone.close()
