"""The leak recorder's matching: a canary is found however a channel wrote it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from thinwire.testing import LeakRecorder
from thinwire.testing.leaks import written_forms


class Recorded(LeakRecorder):
    """A recorder whose channels are given, without a browser."""

    def __init__(self, channels: dict[str, str]) -> None:
        super().__init__()
        self.given = channels

    def channels(self, page: Any) -> dict[str, str]:
        return self.given


@pytest.mark.parametrize(
    "canary",
    [
        "plain-canary-1f",
        'canary-quote-"x-2e',
        "canary-backslash-\\x-3d",
        "canary-tab-\t-4c",
        "kanári-ő-5b",
    ],
)
def test_a_canary_is_found_as_json_and_python_write_it(canary: str) -> None:
    frame = json.dumps({"type": "thinking", "delta": canary})  # as an SSE frame carries it
    assert Recorded({"response body": frame}).leaks(None, {"it": canary}) == [
        "the it canary leaked in response body"
    ]
    stored = str({"thinwire:demo:ada:contextId": canary})  # as the storage channel is written
    assert Recorded({"localStorage": stored}).leaks(None, {"it": canary})
    assert Recorded({"DOM": "nothing private here"}).leaks(None, {"it": canary}) == []


@pytest.mark.parametrize(
    "written",
    [
        "<p>canary&amp;x&lt;y&gt;-6a</p>",  # a text node, as a browser serialises it
        '<a title="canary&amp;x<y>-6a">',  # an attribute value, by an older browser
        "<p>canary&amp;x&lt;y&gt;-6a</p>".replace("<p>", '{"html":"<p>'),  # HTML in JSON
    ],
)
def test_a_canary_is_found_as_html_writes_it(written: str) -> None:
    assert Recorded({"DOM": written}).leaks(None, {"it": "canary&x<y>-6a"})


def test_a_quote_is_found_however_html_escapes_it() -> None:
    canary = "canary-'quoted\"-7b"
    for written in ("canary-&#x27;quoted&quot;-7b", "canary-&#39;quoted&quot;-7b"):
        assert Recorded({"response body": written}).leaks(None, {"it": canary})


# --- a secret streamed in pieces ---------------------------------------------------------

SECRET = 'canary-split-"7a-ő'
CONTEXT, RUN, TURN = "ctx-" + "0" * 36, "run-" + "1" * 24, "turn-000000000000-a0"


def frames_of_a_run(kind: str, secret: str = SECRET) -> list[dict[str, Any]]:
    """A run that sends `secret` a character at a time as `kind` deltas, then ends
    saying something else (a `done` repeats tokens only)."""
    ids = {"contextId": CONTEXT, "runId": RUN}
    frames: list[dict[str, Any]] = [
        {**ids, "seq": 1, "type": "run_start", "agent": "a", "turnId": TURN, "userTurnId": None}
    ]
    for char in secret:
        frames.append({**ids, "seq": len(frames) + 1, "type": kind, "delta": char})
    text = secret if kind == "token" else ""
    frames.append(
        {
            **ids,
            "seq": len(frames) + 1,
            "type": "done",
            "text": text,
            "toolCalls": [],
            "stopReason": "end",
        }
    )
    return frames


def sse(events: list[str]) -> str:
    return "".join(f"data: {event}\n\n" for event in events)


def thinwire_sse(frames: list[dict[str, Any]]) -> str:
    return sse_body([(frame["seq"], json.dumps(frame)) for frame in frames])


def sse_body(frames: list[tuple[int, str]]) -> str:
    from thinwire.sse import encode_all

    return encode_all(frames).decode()


def agui_sse(frames: list[dict[str, Any]]) -> str:
    from thinwire.agui.events import Events

    events = Events("thread-1", "run-1")
    return sse([encoded for frame in frames for encoded in events.encode(frame)])


def aisdk_sse(frames: list[dict[str, Any]]) -> str:
    from thinwire.aisdk.chunks import Chunks

    chunks = Chunks()
    return sse([encoded for frame in frames for encoded in chunks.encode(frame)])


def a2a_sse(frames: list[dict[str, Any]]) -> str:
    from thinwire.a2a.stream import envelope
    from thinwire.a2a.tasks import TaskView

    view = TaskView(since=0.0)
    return sse([envelope(1, event) for frame in frames for event in view.apply(frame)])


def without_done(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [frame for frame in frames if frame["type"] != "done"]


def recorded(**channels: Any) -> LeakRecorder:
    recorder = LeakRecorder()
    for fetch_id, body in channels.get("fetches", {}).items():
        for char in body:  # delivered a character at a time, as a slow stream may be
            recorder._tap(None, "load-1", fetch_id, "fetch", "POST", "http://app/runs", char)
    recorder.websocket_received.update(channels.get("sockets", {}))
    return recorder


def leaked_in(recorder: LeakRecorder, secret: str = SECRET) -> list[str]:
    return [
        channel
        for channel, text in recorder.recorded_channels().items()
        if any(form in text for form in written_forms(secret))
    ]


@pytest.mark.parametrize(
    ("stream", "body"),
    [
        ("thinwire SSE", thinwire_sse),
        ("AG-UI", agui_sse),
        ("AI SDK", aisdk_sse),
        ("A2A", a2a_sse),
    ],
)
@pytest.mark.parametrize("kind", ["thinking", "token"])
def test_a_secret_streamed_a_character_at_a_time_is_joined_back(
    stream: str, body: Any, kind: str
) -> None:
    # Without the `done` (a stream cut, a token stream whose end repeats nothing), no
    # byte of the stream holds the secret whole.
    text = body(without_done(frames_of_a_run(kind)))
    assert not any(form in text for form in written_forms(SECRET)), stream
    leaks = leaked_in(recorded(fetches={"page-1": text}))
    assert leaks and all("joined" in channel for channel in leaks), leaks


def test_a_run_read_over_two_connections_is_joined_in_seq_order_once() -> None:
    frames = without_done(frames_of_a_run("thinking"))
    half = len(frames) // 2
    # The first connection, then a resume that replays some of it; the DevTools copy too.
    first, again = thinwire_sse(frames[:half]), thinwire_sse(frames[half - 3 :])
    recorder = recorded(fetches={"page-1": first, "page-2": again, "page-3": first})
    assert leaked_in(recorder) == [f"thinking deltas of {RUN}, joined in seq order"]
    joined = recorder.recorded_channels()[f"thinking deltas of {RUN}, joined in seq order"]
    assert joined == SECRET


@pytest.mark.parametrize("lines", [True, False], ids=["thinwire.v1.lines", "thinwire.v1"])
def test_a_secret_thought_over_a_websocket_is_joined_back(lines: bool) -> None:
    texts = [json.dumps(frame) for frame in without_done(frames_of_a_run("thinking"))]
    # `thinwire.v1.lines`: a batch of frames is one message, a frame a line.
    messages = ["\n".join(texts[i : i + 3]) for i in range(0, len(texts), 3)] if lines else texts
    recorder = recorded(sockets={"WebSocket 0 ws://app/agents/a/ws": messages})
    assert leaked_in(recorder) == [f"thinking deltas of {RUN}, joined in seq order"]


def test_what_is_not_a_stream_is_searched_raw_and_never_breaks_the_recorder() -> None:
    junk = {
        "html": "<!doctype html><p>data: not json",
        "cut": 'id: 4\ndata: {"type":"thinking","runId":"run-x","seq":',
        "deep": "[" * 100_000 + "]" * 100_000,
        "odd shapes": sse(
            [
                '{"type":"thinking","runId":7,"seq":"x","delta":"c"}',
                '{"result":{"artifactUpdate":{"artifact":{"parts":"no"}}}}',
                '{"result":{"statusUpdate":{"status":{"message":{"parts":[1,{"text":2}]}}}}}',
                '{"delta":["a"]}',
                "[DONE]",
            ]
        ),
        "the secret, whole": f"data: {SECRET}\n\n",
    }
    recorder = recorded(fetches=junk)
    assert leaked_in(recorder) == ["fetch 4 POST http://app/runs (as the page read it)"]


# --- what the page read, by API; what it received -----------------------------------------


def tap(recorder: LeakRecorder, tap_id: str, api: str, method: str, url: str, *texts: str) -> None:
    for text in texts:
        recorder._tap(None, "load-1", tap_id, api, method, url, text)


def test_each_api_the_page_read_with_is_a_channel_of_its_own_numbered_by_api() -> None:
    recorder = LeakRecorder()
    tap(recorder, "1", "fetch", "POST", "http://app/runs", "a")
    tap(recorder, "2", "XMLHttpRequest", "GET", "http://app/x", "b", "c")
    tap(recorder, "3", "EventSource", "GET", "http://app/events", "")  # opened, nothing yet
    tap(recorder, "4", "XMLHttpRequest", "POST", "http://app/y", "d")
    tap(recorder, "5", "WebSocket", "", "ws://app/ws", "e", "f")
    assert {
        name: text
        for name, text in recorder.recorded_channels().items()
        if name.endswith("(as the page read it)")
    } == {
        "fetch 0 POST http://app/runs (as the page read it)": "a",
        "XMLHttpRequest 0 GET http://app/x (as the page read it)": "bc",
        "EventSource 0 GET http://app/events (as the page read it)": "",
        "XMLHttpRequest 1 POST http://app/y (as the page read it)": "d",
        "WebSocket 0 ws://app/ws (as the page read it)": "ef",
    }
    assert recorder.fetched == {"http://app/runs": "a"}


def test_a_secret_an_event_source_dispatched_in_pieces_is_joined_back() -> None:
    # The in-page tap writes each event an EventSource dispatched back as SSE; a
    # WebSocket's messages, one by one.
    frames = without_done(frames_of_a_run("thinking"))
    events = [f"id: {frame['seq']}\ndata: {json.dumps(frame)}\n\n" for frame in frames]
    for api, url in (("EventSource", "http://app/events"), ("WebSocket", "ws://app/ws")):
        recorder = LeakRecorder()
        messages = events if api == "EventSource" else [json.dumps(frame) for frame in frames]
        tap(recorder, "1", api, "GET", url, *messages)
        assert leaked_in(recorder) == [f"thinking deltas of {RUN}, joined in seq order"], api


def test_what_the_page_received_leaves_out_what_it_sent_held_or_logged() -> None:
    recorder = LeakRecorder()
    tap(recorder, "1", "fetch", "POST", "http://app/runs", "came back")
    recorder.websocket_frames += ["sent went out", "received came back too"]
    recorder.websocket_received["WebSocket 0 ws://app/ws"] = ["came back too"]
    recorder.console.append("log: went out")
    received = recorder.recorded_channels(received_only=True)
    assert received == {
        "fetch 0 POST http://app/runs (as the page read it)": "came back",
        "WebSocket 0 ws://app/ws, received": "came back too",
    }
    assert "went out" in recorder.recorded_channels()["WebSocket frames"]
