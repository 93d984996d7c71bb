"""Recording every channel a browser page sees, and asserting no secret crossed any.

    recorder = LeakRecorder()
    recorder.attach(page)
    ... drive the page ...
    recorder.assert_no_leak(page, {"system prompt": "canary-123"})
    recorder.assert_storage_holds_only_context_ids(page)

Channels: every request and response (URLs, bodies and headers, SSE streams included),
what the page's own code read from each fetch, XMLHttpRequest, EventSource and
WebSocket (tapped inside the page), every WebSocket frame, the text streams carried in
pieces joined back (`deltas`), cookies, localStorage, sessionStorage, IndexedDB, Cache
Storage, every frame's document (text, attributes, form values, shadow roots) and URL,
and the console. A failure names each canary and where it was.

Before it searches, the recorder lets the page settle (`settle`): it waits until it has
heard everything the tap handed over and the requests in flight have ended. A response
body it could not read, which no tap read either, fails the assertion (`unchecked`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, unquote_plus

from thinwire.testing.deltas import joined_streams

if TYPE_CHECKING:
    from playwright.sync_api import ConsoleMessage, Frame, Page, Request, Response, WebSocket

__all__ = ["CONTEXT_ID", "LeakRecorder", "browser_storage"]

CONTEXT_ID = re.compile(r"ctx-[0-9a-f]{36}")
CONTEXT_KEY = re.compile(r"thinwire:[^:]+:[^:]+:contextId")

READ_STORAGE = """async () => {
  const dump = (area) => Object.fromEntries(Object.keys(area).map((k) => [k, area.getItem(k)]));
  const indexed = {};
  for (const info of (await indexedDB.databases?.()) ?? []) {
    const db = await new Promise((ok, fail) => {
      const open = indexedDB.open(info.name);
      open.onsuccess = () => ok(open.result);
      open.onerror = () => fail(open.error);
    });
    for (const name of db.objectStoreNames) {
      const all = db.transaction(name).objectStore(name).getAll();
      indexed[`${info.name}/${name}`] = await new Promise((ok) => {
        all.onsuccess = () => ok(all.result);
      });
    }
    db.close();
  }
  const cached = {};
  for (const name of (await globalThis.caches?.keys()) ?? []) {
    const cache = await caches.open(name);
    for (const request of await cache.keys()) {
      cached[`${name} ${request.url}`] = await (await cache.match(request)).text();
    }
  }
  return {
    localStorage: dump(localStorage),
    sessionStorage: dump(sessionStorage),
    indexedDB: indexed,
    cacheStorage: cached,
  };
}"""

#: Installed in every document before its own scripts (see the file): hands the recorder
#: every byte the page's own code reads from the network.
TAP = (Path(__file__).parent / "page_tap.js").read_text(encoding="utf-8")

#: Installed beside the tap: keeps every shadow root a script attaches, closed ones too
#: (which `element.shadowRoot` hides), where the DOM walk finds them.
SHADOWS = """(() => {
  const roots = new WeakMap();
  Object.defineProperty(window, "__thinwireShadowRoots", { value: roots });
  const attachShadow = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (...args) {
    const root = attachShadow.apply(this, args);
    roots.set(this, root);
    return root;
  };
})();"""

#: One frame's document as text: its markup, every shadow root's (nested ones too) and
#: every form value, shadow roots' included; its URL and history state.
DOM = """() => {
  const parts = [document.documentElement?.outerHTML ?? ""];
  const kept = window.__thinwireShadowRoots;
  const walk = (root) => {
    for (const element of root.querySelectorAll("*")) {
      if ("value" in element && typeof element.value === "string") parts.push(element.value);
      const shadow = element.shadowRoot ?? kept?.get(element);
      if (shadow) {
        parts.push(shadow.innerHTML);
        walk(shadow);
      }
    }
  };
  walk(document);
  let state;
  try {
    state = JSON.stringify(history.state) ?? "";
  } catch (error) {
    state = String(history.state);
  }
  return { document: parts.join("\\n"), url: location.href, state };
}"""


def browser_storage(page: Page) -> dict[str, Any]:
    """localStorage, sessionStorage, IndexedDB and Cache Storage of the page's origin."""
    result: dict[str, Any] = page.evaluate(READ_STORAGE)
    return result


@dataclass
class Exchange:
    request: Request
    request_headers: str
    response_headers: str
    response_body: str
    #: Why the response body could not be read, when it could not.
    unreadable: str | None = None


@dataclass
class Tapped:
    """What the page's own code could read from one request (or socket): its API
    ("fetch", "XMLHttpRequest", "EventSource", "WebSocket"), method, URL, and the
    pieces as they came (a WebSocket's: message by message)."""

    api: str
    method: str
    url: str
    pieces: list[str] = field(default_factory=list)
    #: The page saw it end (its body read to the end, aborted, closed).
    ended: bool = False

    @property
    def text(self) -> str:
        return "".join(self.pieces)


#: Playwright's resource type of the requests each in-page tap reads.
TAPPED_RESOURCES = {"fetch": "fetch", "xhr": "XMLHttpRequest", "eventsource": "EventSource"}
#: A redirect's body is never handed to the page (the browser follows it), nor kept.
REDIRECT_STATUSES = range(300, 400)
#: Answers that carry no body: there is nothing to read, and nothing a tap could read.
EMPTY_STATUSES = (204, 205, 304)
#: How many pieces a document's tap handed over: its load id and the count.
TAPS_SENT = "() => window.__thinwireTapsSent?.() ?? null"


def read_body(response: Response) -> tuple[str, str | None]:
    """The body as text, and why it could not be read, if it could not."""
    if response.status in EMPTY_STATUSES or response.request.method == "HEAD":
        return "", None
    try:
        return response.body().decode("utf-8", "replace"), None
    except Exception as exc:  # an aborted stream, a body the browser dropped
        if response.status in REDIRECT_STATUSES:
            return "", None
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"<body unavailable: {exc}>", why


def without_fragment(url: str) -> str:
    return url.split("#", 1)[0]


def page_channels(page: Page) -> dict[str, str]:
    """What the page holds: cookies, storage, and every frame's document, URL and
    history state."""
    seen = {"cookies": str(page.context.cookies())}
    for area, content in browser_storage(page).items():
        seen[area] = str(content)
    for index, frame in enumerate(page.frames):
        seen.update(frame_channels(frame, "" if frame is page.main_frame else f" of frame {index}"))
    return seen


def frame_channels(frame: Frame, which: str) -> dict[str, str]:
    try:
        found = frame.evaluate(DOM)
    except Exception as exc:  # detached or navigating meanwhile
        return {f"DOM{which} {frame.url}": f"<document unavailable: {exc}>"}
    return {
        f"DOM{which}": found["document"],
        f"URL{which}": readable_url(found["url"]),
        f"history state{which}": found["state"],
    }


def readable_url(url: str) -> str:
    """A URL as it is and decoded: a browser escapes some characters of a query (`<` as
    `%3C`) and not others (`&`)."""
    return "\n".join([url, unquote(url), unquote_plus(url)])


@dataclass
class LeakRecorder:
    """Everything that crossed into one browser page."""

    exchanges: list[Exchange] = field(default_factory=list)
    #: What the page's own code could read from each fetch, XMLHttpRequest, EventSource
    #: and WebSocket, tapped inside the page: its id -> what it read.
    tapped: dict[str, Tapped] = field(default_factory=dict)
    websocket_frames: list[str] = field(default_factory=list)
    #: What each WebSocket received, message by message: "WebSocket N url" -> messages.
    websocket_received: dict[str, list[str]] = field(default_factory=dict)
    console: list[str] = field(default_factory=list)
    #: How long `settle` waits, at most, for the page's taps and requests in flight.
    settle_timeout: float = 5.0
    #: Taps heard, per document (its load id).
    _heard: dict[str, int] = field(default_factory=dict, repr=False)
    _in_flight: set[Request] = field(default_factory=set, repr=False)
    _responded: set[Request] = field(default_factory=set, repr=False)

    @property
    def requests(self) -> list[Request]:
        return [exchange.request for exchange in self.exchanges]

    @property
    def fetched(self) -> dict[str, str]:
        """What each fetch response delivered to the page's own code: url -> text."""
        read: dict[str, str] = {}
        for tapped in self.tapped.values():
            if tapped.api == "fetch":
                read[tapped.url] = read.get(tapped.url, "") + tapped.text
        return read

    def attach(self, page: Page) -> LeakRecorder:
        """Record `page` from now on; attach before its first navigation."""
        page.expose_binding("__thinwireTap", self._tap)
        page.add_init_script(TAP)
        page.add_init_script(SHADOWS)
        page.on("request", lambda request: self._in_flight.add(request))
        page.on("response", lambda response: self._responded.add(response.request))
        page.on("requestfinished", self._capture)
        page.on("requestfailed", self._capture)
        page.on("websocket", self._watch_socket)
        page.on("console", self._log)
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))
        return self

    def _capture(self, request: Request) -> None:
        try:
            # Read the body now: the browser may drop it after a reload or navigation.
            response = request.response()
            body, unreadable = read_body(response) if response else ("", None)
            self.exchanges.append(
                Exchange(
                    request=request,
                    request_headers=str(request.all_headers()),
                    response_headers=str(response.all_headers()) if response else "",
                    response_body=body,
                    unreadable=unreadable,
                )
            )
        finally:  # only now, recorded, is it no longer in flight
            self._in_flight.discard(request)

    def _tap(
        self,
        source: Any,
        load: str,
        tap_id: str,
        api: str,
        method: str,
        url: str,
        text: str,
        ended: bool = False,
    ) -> None:
        self._heard[load] = self._heard.get(load, 0) + 1
        tapped = self.tapped.setdefault(tap_id, Tapped(api, method, url))
        if text:
            tapped.pieces.append(text)
        tapped.ended = tapped.ended or ended

    def _watch_socket(self, socket: WebSocket) -> None:
        received = self.websocket_received.setdefault(
            f"WebSocket {len(self.websocket_received)} {socket.url}", []
        )

        def record(direction: str) -> Callable[[str | bytes], None]:
            def take(payload: str | bytes) -> None:
                self.websocket_frames.append(f"{direction} {payload!s}")
                if direction == "received":
                    text = (
                        payload.decode("utf-8", "replace")
                        if isinstance(payload, bytes)
                        else payload
                    )
                    received.append(text)

            return take

        socket.on("framesent", record("sent"))
        socket.on("framereceived", record("received"))

    def _log(self, message: ConsoleMessage) -> None:
        self.console.append(f"{message.type}: {message.text}")

    def _tap_reading(self, request: Request, *, open_only: bool = False) -> Tapped | None:
        """The in-page tap that read what `request` brought, if one did (one still
        reading, with `open_only`)."""
        api = TAPPED_RESOURCES.get(request.resource_type)
        url = without_fragment(request.url)
        for tapped in self.tapped.values():
            same = tapped.api == api and without_fragment(tapped.url) == url
            if same and not (open_only and tapped.ended):
                return tapped
        return None

    def _awaited(self) -> list[Request]:
        """Requests in flight whose end is worth waiting for: all but the streams an
        in-page tap is still reading (an open EventSource may never end)."""
        return [r for r in self._in_flight if not self._tap_reading(r, open_only=True)]

    def _taps_unheard(self, page: Page) -> bool:
        """Whether a document of the page made a tap the recorder has not heard yet."""
        for frame in page.frames:
            try:
                sent = frame.evaluate(TAPS_SENT)
            except Exception:  # detached or navigating: a document gone reads no more
                continue
            if sent and self._heard.get(sent["load"], 0) < sent["sent"]:
                return True
        return False

    def settle(self, page: Page) -> None:
        """Wait, `settle_timeout` seconds at most, until the recorder has heard every
        byte each document of the page tapped, and every request in flight has
        finished or failed — but a stream a tap is still reading, whose every byte so
        far the tap has. What is still loading then is reported by `unchecked`."""
        deadline = time.monotonic() + self.settle_timeout
        # Each round trip to the page lets the events that came meanwhile through.
        while self._taps_unheard(page) or self._awaited():
            if time.monotonic() > deadline:
                return
            page.wait_for_timeout(10)

    def recorded_channels(self, *, received_only: bool = False) -> dict[str, str]:
        """Channel name -> everything it carried, as text: what was recorded as it
        crossed (the network, the console), and the text streams carried in pieces,
        joined back. With `received_only`, only what the page received: response headers
        and bodies, what its code read, the WebSocket messages it got, and their
        streams joined back."""
        seen: dict[str, str] = {}
        streams: dict[str, list[str]] = {}
        for index, exchange in enumerate(self.exchanges):
            request = exchange.request
            where = f"request {index} {request.method} {request.url}"
            if not received_only:
                seen[f"{where} (URL)"] = readable_url(request.url)
                seen[f"{where} (request headers)"] = exchange.request_headers
                seen[f"{where} (request body)"] = request.post_data or ""
            seen[f"{where} (response headers)"] = exchange.response_headers
            seen[f"{where} (response body)"] = exchange.response_body
            streams[f"{where} (response body)"] = [exchange.response_body]
        for where, tapped in self.tapped_channels().items():
            seen[where] = tapped.text
            # A socket's messages are each whole; a body's chunks cut anywhere.
            streams[where] = tapped.pieces if tapped.api == "WebSocket" else [tapped.text]
        if received_only:
            seen.update(
                (f"{name}, received", "\n".join(m)) for name, m in self.websocket_received.items()
            )
        else:
            seen["WebSocket frames"] = "\n".join(self.websocket_frames)
            seen["console"] = "\n".join(self.console)
        streams.update(self.websocket_received)
        seen.update(joined_streams(streams))
        return seen

    def tapped_channels(self) -> dict[str, Tapped]:
        """Each tapped request by channel name: "XMLHttpRequest 0 POST url (as the page
        read it)", numbered per API."""
        named: dict[str, Tapped] = {}
        counts: dict[str, int] = {}
        for tapped in self.tapped.values():
            index = counts[tapped.api] = counts.get(tapped.api, -1) + 1
            words = [tapped.api, str(index), tapped.method, tapped.url]
            named[f"{' '.join(w for w in words if w)} (as the page read it)"] = tapped
        return named

    def channels(self, page: Page) -> dict[str, str]:
        """Channel name -> everything it carried, as text, once the page has settled."""
        self.settle(page)
        return {**self.recorded_channels(), **page_channels(page)}

    def unchecked(self) -> list[str]:
        """What reached the page that the recorder could not read, and no in-page tap
        read for it: a response body the browser no longer had, or one still loading
        when `settle` gave up. A canary there would go unseen."""
        found = []
        for index, exchange in enumerate(self.exchanges):
            if exchange.unreadable and not self._tap_reading(exchange.request):
                request = exchange.request
                found.append(
                    f"request {index} {request.method} {request.url} (response body): "
                    f"unreadable ({exchange.unreadable}), and no in-page tap read it"
                )
        for request in self._awaited():
            if request in self._responded:
                found.append(
                    f"{request.method} {request.url} (response body): still loading after "
                    f"{self.settle_timeout:g} s, and no in-page tap is reading it"
                )
        return found

    def leaks(
        self,
        page: Page,
        canaries: Mapping[str, str],
        *,
        sent_by_page: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Where each canary crossed into the page. Those `sent_by_page` (a run's
        `data`, text the user typed) are in the page's own requests, DOM and storage by
        design, and are searched only in what the page received."""
        found = found_in(self.channels(page), canaries)
        if sent_by_page:
            found += found_in(self.recorded_channels(received_only=True), sent_by_page)
        return found

    def assert_no_leak(
        self,
        page: Page,
        canaries: Mapping[str, str],
        *,
        sent_by_page: Mapping[str, str] | None = None,
    ) -> None:
        """Fail, naming each canary and channel, if any canary crossed into the page —
        or if something reached it that the recorder could not read (`unchecked`)."""
        failures = self.leaks(page, canaries, sent_by_page=sent_by_page)
        failures += [f"unchecked: {what}" for what in self.unchecked()]
        assert not failures, "\n".join(failures)

    def assert_storage_holds_only_context_ids(self, page: Page) -> dict[str, str]:
        """Fail unless the page stored nothing but context ids, under per-user keys.

        Returns the stored ids by key.
        """
        storage = browser_storage(page)
        local: dict[str, str] = storage["localStorage"]
        wrong = {
            k: v
            for k, v in local.items()
            if not (CONTEXT_KEY.fullmatch(k) and CONTEXT_ID.fullmatch(v))
        }
        assert not wrong, f"localStorage holds more than context ids: {wrong}"
        for area in ("sessionStorage", "indexedDB", "cacheStorage"):
            assert not storage[area], f"{area} is not empty: {storage[area]}"
        return local


#: How HTML writes text: `html.escape`; Jinja, markupsafe and React (`&#39;`); a browser
#: serialising a text node; and an attribute value (older browsers leave `<` `>` as is).
HTML_ESCAPES = [
    str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"}),
    str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}),
    str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\xa0": "&nbsp;"}),
    str.maketrans({"&": "&amp;", '"': "&quot;", "\xa0": "&nbsp;"}),
    str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\xa0": "&nbsp;"}),
]


def found_in(channels: Mapping[str, str], canaries: Mapping[str, str]) -> list[str]:
    return [
        f"the {name} canary leaked in {channel}"
        for channel, text in channels.items()
        for name, canary in canaries.items()
        if any(form in text for form in written_forms(canary))
    ]


def written_forms(canary: str) -> set[str]:
    """The ways a channel may carry `canary`: as it is; as HTML writes it (a page's
    markup, a rendered response); each of those as JSON writes it inside a string (a
    quote, a backslash, a control character or non-ASCII escaped), as frames and
    transcripts carry it; and as Python writes it (the recorded storage and cookies)."""
    forms = {repr(canary)[1:-1]}
    for form in {canary, *(canary.translate(table) for table in HTML_ESCAPES)}:
        forms |= {form, json.dumps(form)[1:-1], json.dumps(form, ensure_ascii=False)[1:-1]}
    return forms
