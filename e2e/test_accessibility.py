"""The demo page for keyboard and screen-reader users: axe-core finds nothing in any
state the page takes, light or dark, and the keyboard reaches what the mouse does,
with focus never dropped on the page's body."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from conftest import Demo
from test_conversation import open_as, send, wait_for_reply
from test_streams import STREAMING_REPLY

# A root devDependency: `npm ci` (make install) puts it here.
AXE = Path(__file__).resolve().parents[1] / "node_modules" / "axe-core" / "axe.min.js"
# Enough words that the reply quoting them streams for seconds on the slow demo.
LONG = " ".join(f"word{n}" for n in range(80))


def axe_violations(page: Page) -> list[str]:
    """Every axe-core violation on the page, one line per element.

    All impacts count, not only serious and critical: the page is small enough to have
    none, and a "moderate" rule such as `region` is the one that tells whether a screen
    reader's landmark navigation reaches the message box."""
    if not AXE.exists():
        pytest.fail(f"{AXE} is missing: `npm ci` at the project's root installs axe-core")
    # Evaluated over the DevTools protocol: the page's CSP would refuse an added <script>.
    if not page.evaluate("typeof axe === 'object'"):
        page.evaluate(AXE.read_text())
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    return [
        f"{violation['id']} ({violation['impact']}) {node['target']}: {node['failureSummary']}"
        for violation in results["violations"]
        for node in violation["nodes"]
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_in_any_state_of_the_page(
    page: Page, slow_demo: Demo, scheme: str
) -> None:
    page.emulate_media(color_scheme=scheme)
    open_as(page, slow_demo, "alice")
    found = {"idle, empty": axe_violations(page)}

    send(page, LONG)  # the tool's activity shows done while the reply streams
    expect(page.locator('[data-testid="activity-item"][data-state="ok"]')).to_be_visible()
    page.wait_for_function(
        f"() => document.querySelector('{STREAMING_REPLY}')?.textContent", polling=50
    )
    found["mid-stream"] = axe_violations(page)
    expect(page.get_by_test_id("status")).to_have_text("streaming")  # it was scanned mid-stream
    page.get_by_test_id("stop").click()
    wait_for_reply(page, 1)
    page.get_by_test_id("message-input").fill("a draft")  # Send is enabled
    found["idle, a reply shown"] = axe_violations(page)

    send(page, "I would like a refund")
    expect(page.get_by_test_id("decide-approve")).to_be_enabled()
    found["a question pending"] = axe_violations(page)
    page.get_by_test_id("decide-reject").click()
    wait_for_reply(page, 2)

    send(page, "explode")
    expect(page.get_by_test_id("error")).to_be_visible()
    found["an error shown"] = axe_violations(page)

    problems = [f"{state}: {line}" for state, lines in found.items() for line in lines]
    assert not problems, "\n".join(problems)


def focused(page: Page) -> str:
    """The focused element's test id, or its tag name when it has none."""
    name: str = page.evaluate(
        "document.activeElement.dataset.testid ?? document.activeElement.tagName"
    )
    return name


def type_and_enter(page: Page, text: str) -> None:
    page.get_by_test_id("message-input").focus()
    page.keyboard.type(text)
    page.keyboard.press("Enter")


def test_a_skip_link_leads_past_the_conversation_list_to_the_message_box(
    page: Page, demo: Demo
) -> None:
    open_as(page, demo, "alice")
    page.keyboard.press("Tab")
    link = page.get_by_test_id("skip-to-message")
    expect(link).to_be_focused()
    expect(link).to_have_text("Skip to message box")
    expect(link).to_be_in_viewport()  # hidden until focused, and then seen
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("message-input")).to_be_focused()


def test_a_question_is_found_answered_and_left_by_keyboard(page: Page, demo: Demo) -> None:
    open_as(page, demo, "bob")
    type_and_enter(page, "I would like a refund")
    expect(page.get_by_test_id("approval")).to_be_visible()
    box = page.get_by_test_id("message-input")
    expect(box).to_be_focused()  # the question does not take the focus from someone typing
    hint = page.get_by_test_id("composer-hint")
    expect(box).to_have_accessible_description("Answer the question above first.")

    # Just before the box in the tab order, the question's answers...
    page.keyboard.press("Shift+Tab")
    assert focused(page) == "decide-reject"
    # ...and forward, past Stop, the hint, which goes to them.
    box.focus()
    page.keyboard.press("Tab")
    assert focused(page) == "stop"
    page.keyboard.press("Tab")
    expect(hint).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("decide-approve")).to_be_focused()

    # Answered, the buttons go, and the focus goes back to the box, not to the body.
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("approval")).to_have_count(0)
    expect(box).to_be_focused()
    wait_for_reply(page, 2)
    expect(box).to_be_focused()


def test_a_dismissed_error_gives_the_focus_back_to_the_message_box(page: Page, demo: Demo) -> None:
    open_as(page, demo, "carol")
    type_and_enter(page, "explode")
    expect(page.get_by_test_id("error")).to_be_visible()
    page.keyboard.press("Shift+Tab")
    assert focused(page) == "dismiss-error"
    page.keyboard.press("Enter")
    expect(page.get_by_test_id("error")).to_have_count(0)
    expect(page.get_by_test_id("message-input")).to_be_focused()


def test_send_and_stop_by_keyboard_leave_the_focus_in_the_message_box(
    page: Page, slow_demo: Demo
) -> None:
    open_as(page, slow_demo, "alice")
    box = page.get_by_test_id("message-input")
    box.fill(LONG)
    page.keyboard.press("Tab")
    assert focused(page) == "send"
    page.keyboard.press("Enter")  # Send turns off while the reply streams...
    expect(page.get_by_test_id("status")).to_have_text("streaming")
    expect(box).to_be_focused()  # ...and the focus is back in the box
    page.keyboard.press("Tab")
    assert focused(page) == "stop"
    page.keyboard.press("Enter")  # Stop turns off too
    wait_for_reply(page, 1)
    expect(box).to_be_focused()


def test_regenerate_and_an_edit_by_keyboard_leave_the_focus_in_the_message_box(
    page: Page, demo: Demo
) -> None:
    open_as(page, demo, "dave")
    type_and_enter(page, "hello there")
    wait_for_reply(page, 1)
    box = page.get_by_test_id("message-input")
    page.get_by_test_id("regenerate").focus()
    page.keyboard.press("Enter")  # Regenerate turns off while the new reply streams
    expect(box).to_be_focused()
    wait_for_reply(page, 1)

    page.get_by_test_id("edit").first.focus()
    page.keyboard.press("Enter")
    edit = page.get_by_test_id("edit-input")
    expect(edit).to_be_focused()
    edit.fill("hello again")
    page.get_by_test_id("edit-save").focus()
    page.keyboard.press("Enter")  # the edit's box goes away with its buttons
    expect(page.get_by_test_id("edit-input")).to_have_count(0)
    expect(box).to_be_focused()
