"""The leak recorder's own reach: a secret a page holds is found wherever its script
put it — shadow roots however deep (closed ones too), form values inside them, another
frame's document, the URL and history state — and however HTML wrote it."""

from __future__ import annotations

import secrets

import pytest
from playwright.sync_api import Page

from conftest import Demo
from thinwire.testing import LeakRecorder

#: Each puts `secret` (the argument) in one place of the page, and the channel it is
#: then found in.
PLACES = {
    "a shadow root in a shadow root": (
        """(secret) => {
          const outer = document.body.appendChild(document.createElement("div"));
          const inner = outer.attachShadow({ mode: "open" }).appendChild(document.createElement("p"));
          inner.attachShadow({ mode: "open" }).append(secret);
        }""",
        "DOM",
    ),
    "a closed shadow root": (
        """(secret) => {
          const host = document.body.appendChild(document.createElement("div"));
          host.attachShadow({ mode: "closed" }).append(secret);
        }""",
        "DOM",
    ),
    "an input's value in a shadow root": (
        """(secret) => {
          const host = document.body.appendChild(document.createElement("div"));
          const input = host.attachShadow({ mode: "open" }).appendChild(document.createElement("input"));
          input.value = secret;
        }""",
        "DOM",
    ),
    "a frame's document, written by script": (
        """(secret) => {
          const frame = document.body.appendChild(document.createElement("iframe"));
          frame.contentDocument.body.append(secret);
        }""",
        "DOM of frame 1",
    ),
    "the URL": (
        """(secret) => history.pushState(null, "", `?q=${secret}`)""",
        "URL",
    ),
    "the history state": (
        """(secret) => history.replaceState({ draft: secret }, "")""",
        "history state",
    ),
    "the page's text, as HTML escapes it": (
        """(secret) => document.body.append(secret)""",
        "DOM",
    ),
}


@pytest.mark.parametrize("place", PLACES)
def test_a_secret_the_page_holds_is_found_where_its_script_put_it(
    page: Page, demo: Demo, recorder: LeakRecorder, place: str
) -> None:
    # `&` and `<`: the page's markup holds `&amp;` and `&lt;`, its URL `%3C`.
    secret = f"tw-page-{secrets.token_hex(6)}&x<y>"
    script, channel = PLACES[place]
    page.goto(f"{demo.url}/?user=alice")
    page.evaluate(script, secret)
    assert recorder.leaks(page, {"page": secret}) == [f"the page canary leaked in {channel}"]
