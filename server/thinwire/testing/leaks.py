"""Recording every channel a browser page sees, and asserting no secret crossed any.

    recorder = LeakRecorder()
    recorder.attach(page)
    ... drive the page ...
    recorder.assert_no_leak(page, {"system prompt": "canary-123"})
    recorder.assert_storage_holds_only_context_ids(page)

Channels: every request and response (URLs, bodies and headers, SSE streams included),
every WebSocket frame, the text streams carried in pieces joined back (`deltas`), cookies,
localStorage, sessionStorage, IndexedDB, Cache Storage, every frame's document (text,
attributes, form values, shadow roots) and URL, and the console. A failure names each
canary and where it was.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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

#: Installed in every document before its own scripts: hands every byte a fetch response
#: delivers to the page (streams included) to the recorder, chunk by chunk, each fetch
#: under an id of its own. DevTools may drop a streamed body it did not buffer; what the
#: page itself read is never lost.
TAP = """(() => {
  const tap = window.__thinwireTap;
  const fetch = window.fetch.bind(window);
  let fetches = 0;
  const load = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  window.fetch = async (...args) => {
    const response = await fetch(...args);
    // A null-body status (204, 304…) has nothing to record, and a Response rebuilt
    // around a stream for one is refused.
    if (!response.body || [101, 204, 205, 304].includes(response.status)) return response;
    const id = `${load}-${(fetches += 1)}`;
    const [mine, theirs] = response.body.tee();
    (async () => {
      const reader = theirs.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        tap(id, response.url, decoder.decode(value, { stream: true }));
      }
    })().catch(() => {});
    const copy = new Response(mine, response);
    Object.defineProperty(copy, "url", { value: response.url });
    return copy;
  };
})();"""

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


def body_text(response: Response) -> str:
    try:
        return response.body().decode("utf-8", "replace")
    except Exception as exc:  # a redirect or an aborted stream has no body to read
        return f"<body unavailable: {exc}>"


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
    #: What each fetch response delivered to the page's own code: url -> text.
    fetched: dict[str, str] = field(default_factory=dict)
    #: The same, one fetch at a time: its id -> (url, text).
    fetches: dict[str, tuple[str, str]] = field(default_factory=dict)
    websocket_frames: list[str] = field(default_factory=list)
    #: What each WebSocket received, message by message: "WebSocket N url" -> messages.
    websocket_received: dict[str, list[str]] = field(default_factory=dict)
    console: list[str] = field(default_factory=list)

    @property
    def requests(self) -> list[Request]:
        return [exchange.request for exchange in self.exchanges]

    def attach(self, page: Page) -> LeakRecorder:
        """Record `page` from now on; attach before its first navigation."""
        page.expose_binding("__thinwireTap", self._tap)
        page.add_init_script(TAP)
        page.add_init_script(SHADOWS)
        page.on("requestfinished", self._capture)
        page.on("requestfailed", self._capture)
        page.on("websocket", self._watch_socket)
        page.on("console", self._log)
        page.on("pageerror", lambda error: self.console.append(f"pageerror: {error}"))
        return self

    def _capture(self, request: Request) -> None:
        # Read the body now: the browser may drop it after a reload or navigation.
        response = request.response()
        self.exchanges.append(
            Exchange(
                request=request,
                request_headers=str(request.all_headers()),
                response_headers=str(response.all_headers()) if response else "",
                response_body=body_text(response) if response else "",
            )
        )

    def _tap(self, source: Any, fetch_id: str, url: str, text: str) -> None:
        self.fetched[url] = self.fetched.get(url, "") + text
        _, before = self.fetches.get(fetch_id, (url, ""))
        self.fetches[fetch_id] = (url, before + text)

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

    def recorded_channels(self) -> dict[str, str]:
        """Channel name -> everything it carried, as text: what was recorded as it
        crossed (the network, the console), and the text streams carried in pieces,
        joined back."""
        seen: dict[str, str] = {}
        streams: dict[str, list[str]] = {}
        for index, exchange in enumerate(self.exchanges):
            request = exchange.request
            where = f"request {index} {request.method} {request.url}"
            seen[f"{where} (URL)"] = readable_url(request.url)
            seen[f"{where} (request headers)"] = exchange.request_headers
            seen[f"{where} (request body)"] = request.post_data or ""
            seen[f"{where} (response headers)"] = exchange.response_headers
            seen[f"{where} (response body)"] = exchange.response_body
            streams[f"{where} (response body)"] = [exchange.response_body]
        for index, (url, text) in enumerate(self.fetches.values()):
            where = f"fetch {index} {url} (as the page read it)"
            seen[where] = text
            streams[where] = [text]
        seen["WebSocket frames"] = "\n".join(self.websocket_frames)
        streams.update(self.websocket_received)
        seen["console"] = "\n".join(self.console)
        seen.update(joined_streams(streams))
        return seen

    def channels(self, page: Page) -> dict[str, str]:
        """Channel name -> everything it carried, as text."""
        return {**self.recorded_channels(), **page_channels(page)}

    def leaks(self, page: Page, canaries: Mapping[str, str]) -> list[str]:
        return [
            f"the {name} canary leaked in {channel}"
            for channel, text in self.channels(page).items()
            for name, canary in canaries.items()
            if any(form in text for form in written_forms(canary))
        ]

    def assert_no_leak(self, page: Page, canaries: Mapping[str, str]) -> None:
        """Fail, naming each canary and channel, if any canary crossed into the page."""
        leaks = self.leaks(page, canaries)
        assert not leaks, "\n".join(leaks)

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


def written_forms(canary: str) -> set[str]:
    """The ways a channel may carry `canary`: as it is; as HTML writes it (a page's
    markup, a rendered response); each of those as JSON writes it inside a string (a
    quote, a backslash, a control character or non-ASCII escaped), as frames and
    transcripts carry it; and as Python writes it (the recorded storage and cookies)."""
    forms = {repr(canary)[1:-1]}
    for form in {canary, *(canary.translate(table) for table in HTML_ESCAPES)}:
        forms |= {form, json.dumps(form)[1:-1], json.dumps(form, ensure_ascii=False)[1:-1]}
    return forms
