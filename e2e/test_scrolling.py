"""The page keeps the newest content in view above the composer pinned to the window's
bottom — the reply, the question and its buttons — while the reader is at the bottom,
and leaves a reader who scrolled up to read where they are."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from conftest import Demo
from test_conversation import open_as, send, wait_for_reply
from test_streams import wait_for_partial_reply

# A message, and so a reply quoting it, taller than the window.
TALL = "tall" + "\n" * 30 + "message"
LAST_REPLY = '[data-testid="turn"][data-role="assistant"]'
APPROVE = '[data-testid="decide-approve"]'

# The last element `selector` matches is on screen and clear of the composer: its
# bottom is in the window, above the composer's top (and, `whole`, its top too).
ABOVE_COMPOSER = """([selector, whole]) => {
  const found = document.querySelectorAll(selector);
  if (found.length === 0) return false;
  const box = found[found.length - 1].getBoundingClientRect();
  const composer = document.querySelector('[data-testid="composer"]').getBoundingClientRect();
  return box.bottom > 0 && box.bottom <= composer.top && (!whole || box.top >= 0);
}"""


def in_view_above_composer(page: Page, selector: str, whole: bool = False) -> None:
    page.wait_for_function(ABOVE_COMPOSER, arg=[selector, whole])


def overflows(page: Page) -> bool:
    taller: bool = page.evaluate("document.documentElement.scrollHeight > innerHeight + 200")
    return taller


def test_the_newest_reply_and_the_question_stay_above_the_composer(page: Page, demo: Demo) -> None:
    page.set_viewport_size({"width": 1200, "height": 800})
    open_as(page, demo, "carol")
    send(page, TALL)
    wait_for_reply(page, 1)
    assert overflows(page)
    send(page, "and one more")
    wait_for_reply(page, 2)
    in_view_above_composer(page, LAST_REPLY)

    send(page, "I would like a refund")
    expect(page.get_by_test_id("approval")).to_be_visible()
    in_view_above_composer(page, APPROVE, whole=True)
    page.locator(APPROVE).click()
    wait_for_reply(page, 4)
    in_view_above_composer(page, LAST_REPLY)


def test_a_reader_who_scrolled_up_is_left_there(page: Page, slow_demo: Demo) -> None:
    page.set_viewport_size({"width": 1200, "height": 800})
    open_as(page, slow_demo, "alice")
    send(page, TALL)
    wait_for_reply(page, 1)
    assert overflows(page)
    send(page, "a second look")  # its reply quotes the tall message: long to stream
    wait_for_partial_reply(page)
    in_view_above_composer(page, LAST_REPLY)  # followed as it streams
    page.evaluate("window.scrollTo(0, 0)")  # the reader goes back up to read
    wait_for_reply(page, 2)
    assert page.evaluate("window.scrollY") == 0
    # Sending follows the conversation again.
    send(page, "and a third")
    wait_for_reply(page, 3)
    in_view_above_composer(page, LAST_REPLY)
