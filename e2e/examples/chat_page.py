"""Driving the examples' chat pages in Chromium, by role and label as a person reads them."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

#: Keeps every text the last element matching the selector shows, as it changes.
STREAM_WATCH = """(selector) => {
  window.__texts = [];
  new MutationObserver(() => {
    const all = document.querySelectorAll(selector);
    const last = all[all.length - 1];
    if (last) window.__texts.push(last.textContent);
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
}"""


def watch_stream(page: Page, selector: str) -> None:
    page.evaluate(STREAM_WATCH, selector)


def partial_texts(page: Page, final: str) -> list[str]:
    """The texts the watched element showed on its way to `final`."""
    texts: list[str] = page.evaluate("window.__texts")
    return sorted({t for t in texts if t and final.startswith(t) and t != final})


def send(page: Page, text: str) -> None:
    page.get_by_label("Message").fill(text)
    page.get_by_role("button", name="Send").click()


def expect_status(page: Page, status: str) -> None:
    expect(page.get_by_role("status")).to_have_text(status)


def last(locator: Locator) -> Locator:
    return locator.nth(-1)
