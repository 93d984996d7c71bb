"""The leak recorder's own reach: a secret a page holds is found wherever its script
put it — shadow roots however deep (closed ones too), form values inside them, another
frame's document, the URL and history state — and however HTML wrote it; a secret the
page reads is found whatever API read it, the moment the page has it; and what the
recorder could not read fails the check rather than passing it."""

from __future__ import annotations

import secrets

import pytest
from playwright.sync_api import Page

from conftest import Demo
from thinwire.testing import CONTEXT_ID, LeakRecorder

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


# --- what the page reads, whatever API it reads it with -----------------------------------

#: Each reads what the server sends from the URL it is given through one API, and
#: resolves once the page's code has it all — when a test asks the recorder, at once.
#: Which URL: the run's events (`/events`) or the conversation's transcript.
READERS = {
    "XMLHttpRequest": (
        "/events",
        """(url) => new Promise((done) => {
          const xhr = new XMLHttpRequest();
          xhr.open("GET", url);
          xhr.onload = () => done();
          xhr.send();
        })""",
    ),
    "XMLHttpRequest, as JSON": (
        "",
        """(url) => new Promise((done) => {
          const xhr = new XMLHttpRequest();
          xhr.open("GET", url);
          xhr.responseType = "json";
          xhr.onload = () => done();
          xhr.send();
        })""",
    ),
    # Closed on `done`, the request is aborted: the browser may keep no body to read.
    "EventSource, closed on done": (
        "/events",
        """(url) => new Promise((done) => {
          const source = new EventSource(url);
          source.onmessage = (event) => {
            if (JSON.parse(event.data).type === "done") {
              source.close();
              done();
            }
          };
        })""",
    ),
}


def said_out_of_sight(page: Page, demo: Demo, text: str) -> str:
    """Starts a run whose reply repeats `text` through the browser context's own API
    client (its cookies, none of the page's traffic), and returns its context id: what
    the run said reaches the page only when the page reads it."""
    response = page.request.post(f"{demo.url}/agents/demo/runs", data={"message": {"text": text}})
    found = CONTEXT_ID.search(response.text())
    assert found, response.text()
    return found.group()


@pytest.mark.parametrize("attempt", range(3))  # a race lost would pass some of the time
@pytest.mark.parametrize("reader", READERS)
def test_a_secret_the_page_reads_is_caught_whatever_api_read_it(
    page: Page, demo: Demo, recorder: LeakRecorder, reader: str, attempt: int
) -> None:
    secret = f"tw-read-{secrets.token_hex(6)}"
    page.goto(f"{demo.url}/healthz")
    path, script = READERS[reader]
    url = f"{demo.url}/agents/demo/contexts/{said_out_of_sight(page, demo, secret)}{path}"
    page.evaluate(script, url)

    with pytest.raises(AssertionError) as failed:
        recorder.assert_no_leak(page, {"secret": secret})
    leaks = str(failed.value).splitlines()
    api = reader.split(",")[0]
    assert f"the secret canary leaked in {api} 0 GET {url} (as the page read it)" in leaks
    # The request had ended for the page: the recorder waited for the network's copy
    # too, read (the page's copy is the one tapped when the browser kept none).
    (exchange,) = [e for e in recorder.exchanges if e.request.url == url]
    if exchange.unreadable is None:
        assert any(f"GET {url} (response body)" in leak for leak in leaks), leaks
    assert not [line for line in leaks if line.startswith("unchecked")], leaks


def test_an_honest_page_passes_though_the_browser_kept_no_body_of_a_stream_it_closed(
    page: Page, slow_demo: Demo, recorder: LeakRecorder
) -> None:
    page.goto(f"{slow_demo.url}/healthz")
    # The page starts a run and reads its first chunk; follows it with an EventSource it
    # closes at the first event, mid-run; reads the transcript with XMLHttpRequest.
    page.evaluate(
        """async () => {
          const response = await fetch("/agents/demo/runs", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ message: { text: "hello" } }),
          });
          const first = await response.body.getReader().read();
          const id = new TextDecoder().decode(first.value).match(/ctx-[0-9a-f]{36}/)[0];
          await new Promise((done) => {
            const source = new EventSource(`/agents/demo/contexts/${id}/events`);
            source.onmessage = () => {
              source.close();
              done();
            };
          });
          await new Promise((done) => {
            const xhr = new XMLHttpRequest();
            xhr.open("GET", `/agents/demo/contexts/${id}`);
            xhr.responseType = "json";
            xhr.onload = done;
            xhr.send();
          });
        }"""
    )

    recorder.assert_no_leak(page, slow_demo.canaries)
    # It passed having read what the page read: the event the EventSource dispatched,
    # whose request the browser aborted and kept no body of, and the transcript.
    read = {tapped.api: tapped.text for tapped in recorder.tapped.values()}
    assert '"type":"run_start"' in read["EventSource"]
    assert '"turns":[' in read["XMLHttpRequest"]
    (events,) = [e for e in recorder.exchanges if e.request.url.endswith("/events")]
    assert events.unreadable is not None
    assert recorder.unchecked() == []


def test_an_answer_without_a_body_is_no_unchecked_channel(
    page: Page, demo: Demo, recorder: LeakRecorder
) -> None:
    """A 204 (useChat's resume when nothing runs) carries no body: DevTools has none to
    give, and the page's code reads none; there is nothing a canary could hide in."""
    page.goto(f"{demo.url}/healthz")
    url = f"{demo.url}/ai-sdk/demo/chat/chat-{secrets.token_hex(6)}/stream"
    assert page.evaluate("async (url) => (await fetch(url)).status", url) == 204
    recorder.assert_no_leak(page, {"secret": f"tw-{secrets.token_hex(6)}"})
    assert recorder.unchecked() == []


#: A worker, beyond the in-page tap, starts a run and reads it; it stops reading (the
#: browser then keeps no body of it) or reads on, slowly.
WORKER = """([url, stop]) => new Promise((done) => {
  const code = `onmessage = async (event) => {
    try {
      const controller = new AbortController();
      const response = await fetch(event.data.url, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ message: { text: "from a worker" } }),
        signal: controller.signal,
      });
      const reader = response.body.getReader();
      await reader.read();
      postMessage("read");
      if (event.data.stop) controller.abort();
      else while (!(await reader.read()).done);
    } catch (error) {
      postMessage(String(error));
    }
  };`;
  const worker = new Worker(URL.createObjectURL(new Blob([code], { type: "text/javascript" })));
  worker.onmessage = (event) => done(event.data);
  worker.postMessage({ url, stop });
})"""


@pytest.mark.parametrize(
    ("stop", "why"),
    [(True, r"unreadable \(.*\), and no in-page tap read it"), (False, "still loading after 1 s")],
    ids=["a body the browser dropped", "a body still loading"],
)
def test_what_the_recorder_could_not_read_fails_the_check(
    page: Page, slow_demo: Demo, recorder: LeakRecorder, stop: bool, why: str
) -> None:
    recorder.settle_timeout = 1.0  # the slow run goes on for seconds more
    page.goto(f"{slow_demo.url}/healthz")
    assert page.evaluate(WORKER, [f"{slow_demo.url}/agents/demo/runs", stop]) == "read"
    with pytest.raises(AssertionError, match=rf"unchecked: .*POST \S+/agents/demo/runs .*{why}"):
        recorder.assert_no_leak(page, slow_demo.canaries)
    assert recorder.leaks(page, slow_demo.canaries) == []  # nothing found: nothing read


def test_a_canary_the_page_sends_is_checked_in_what_came_back(
    page: Page, demo: Demo, recorder: LeakRecorder
) -> None:
    data = f"tw-data-{secrets.token_hex(6)}"  # a run's data: kept on the server, not said
    typed = f"tw-typed-{secrets.token_hex(6)}"  # the message: the demo's reply repeats it
    page.goto(f"{demo.url}/healthz")
    page.evaluate(
        """async ([data, text]) => {
          const response = await fetch("/agents/demo/runs", {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ message: { text }, data: { note: data } }),
          });
          await response.text();
        }""",
        [data, typed],
    )

    # Searched everywhere, both are in the request the page sent...
    with pytest.raises(AssertionError, match=r"the data canary leaked in .*\(request body\)"):
        recorder.assert_no_leak(page, {"data": data, "typed": typed})
    # ...and in what came back, only the one the reply repeats.
    recorder.assert_no_leak(page, {}, sent_by_page={"data": data})
    echoed = recorder.leaks(page, {}, sent_by_page={"typed": typed})
    assert any("fetch 0 POST" in leak and "(as the page read it)" in leak for leak in echoed)
    assert not any("request body" in leak or "DOM" in leak for leak in echoed), echoed
