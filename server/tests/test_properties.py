"""Property tests of the frame encoder and the request parser, with hypothesis."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from conftest import app_for, parse_sse
from thinwire import wire
from thinwire.demo import DemoAgent
from thinwire.errors import StateValueError
from thinwire.jsontext import is_unicode
from thinwire.runlog import encode_frame
from thinwire.sse import encode
from thinwire.state import check_json, copy_json

ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=200)


def utf8_safe(text: str) -> str:
    """The text as UTF-8 can carry it: each lone surrogate one U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


@given(delta=ANY_TEXT, seq=st.integers(min_value=1, max_value=2**53))
@example(delta="a\ud800b\udfff", seq=1)  # lone surrogates: rare in random text
def test_any_text_round_trips_through_an_sse_frame(delta: str, seq: int) -> None:
    data = encode_frame(wire.TokenFrame, "ctx-1", "run-1", seq, delta=delta)
    event = encode(seq, data)
    assert event.endswith(b"\n\n") and event.count(b"\n\n") == 1  # one event, whatever the text
    (frame,) = parse_sse(event.decode("utf-8"))
    assert frame["delta"] == utf8_safe(delta)  # exact, or with U+FFFD for lone surrogates
    assert frame["seq"] == seq and frame["_id"] == str(seq)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)
BODIES = (
    JSON.map(lambda value: json.dumps(value).encode())
    | st.fixed_dictionaries({"message": st.fixed_dictionaries({"text": ANY_TEXT})}).map(
        lambda value: json.dumps(value).encode()
    )
    | st.binary(max_size=300)
)
CONTENT_TYPES = st.sampled_from(
    ["application/json", "application/json; charset=utf-8", "text/plain", ""]
)

client = TestClient(app_for({"demo": DemoAgent}, runs_per_second=0))


def containers(value: Any) -> list[int]:
    """The ids of every dict and list in a JSON value."""
    if isinstance(value, dict):
        return [id(value), *(i for item in value.values() for i in containers(item))]
    if isinstance(value, list):
        return [id(value), *(i for item in value for i in containers(item))]
    return []


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_a_copied_json_value_is_equal_and_shares_no_container(value: Any) -> None:
    try:
        check_json(value)
    except StateValueError:
        assume(False)  # infinities: AgentState refuses them before copying
    copied = copy_json(value)
    assert json.dumps(copied) == json.dumps(value)
    assert not set(containers(copied)) & set(containers(value))


@settings(max_examples=300, deadline=None)
@given(value=JSON)
def test_check_json_refuses_exactly_what_a_store_cannot_write(value: Any) -> None:
    try:
        writable = is_unicode(json.dumps(value, allow_nan=False, ensure_ascii=False))
    except ValueError:
        writable = False  # infinities
    try:
        check_json(value)
    except StateValueError:
        assert not writable
    else:
        assert writable


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=BODIES, content_type=CONTENT_TYPES)
def test_any_request_body_gets_a_stream_or_a_typed_4xx(body: bytes, content_type: str) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/agents/demo/runs", content=body, headers=headers)
    if response.status_code == 200:
        frames = parse_sse(response.text)
        assert frames[0]["type"] == "run_start" and frames[-1]["type"] == "done"
        return
    assert response.status_code in (400, 413, 415), response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"code", "message", "retryable"} and error["retryable"] is False
    assert error["code"] in {
        "invalid_json",
        "invalid_request",
        "message_too_large",
        "body_too_large",
        "unsupported_media_type",
    }


@settings(max_examples=100, deadline=None)
@given(delta=ANY_TEXT)
@example(delta="a\ud800b\udfff")
def test_the_run_log_fast_path_sends_any_text(delta: str) -> None:
    """Deltas skip the model on the hot path; whatever the text, the frame is valid JSON."""
    import asyncio

    from thinwire.contexts import ContextRegistry, new_record
    from thinwire.runlog import RunLog
    from thinwire.stores import MemoryStore

    async def frames() -> list[str]:
        store = MemoryStore()
        registry = ContextRegistry(store, {"demo": DemoAgent})
        await store.create(new_record("ctx-a", "demo", DemoAgent(), "ada"))
        log = RunLog(await registry.get("demo", "ctx-a", "ada"), "run-1", 1_000)
        log.token(delta)
        log.thinking(delta)
        return log.frames

    for data in asyncio.run(frames()):
        assert json.loads(data)["delta"] == utf8_safe(delta)
