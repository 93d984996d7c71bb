"""Hostile input and failing stores, round two: every one gets a typed answer, never a
500, a hang or silence."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import BaseModel, ConfigDict
from starlette.requests import Request
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from conftest import app_for, send
from thinwire import Agent, Run, SQLiteStore
from thinwire.boundary import error_response
from thinwire.demo import DemoAgent
from thinwire.errors import BadRequest, RequestTimeout, ThinwireError
from thinwire.parsing import MAX_DEPTH, MAX_MESSAGE, read_json, validated

HUGE = "1" + "0" * 5000  # more digits than Python turns into an int from JSON
TOKEN = "hostile-operator-token"
OPERATOR = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def client() -> Iterator[TestClient]:
    with TestClient(app_for({"demo": DemoAgent}, operator_token=TOKEN)) as test_client:
        yield test_client


def code_of(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return str(response.json()["error"]["code"])


def test_integers_of_thousands_of_digits_are_invalid_json(client: TestClient) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    json_body = {"content-type": "application/json"}
    runs = f'{{"message": {{"text": "hi"}}, "contextId": {HUGE}}}'
    assert code_of(client.post("/agents/demo/runs", content=runs, headers=json_body), 400) == (
        "invalid_json"
    )
    decision = f'{{"interruptId": "int-1", "value": {HUGE}}}'
    url = f"/agents/demo/contexts/{context_id}/decisions"
    assert code_of(client.post(url, content=decision, headers=json_body), 400) == "invalid_json"
    patch = f'{{"state": {{"notes": {HUGE}}}}}'
    url = f"/admin/agents/demo/contexts/{context_id}/state"
    headers = {**json_body, **OPERATOR}
    assert code_of(client.patch(url, content=patch, headers=headers), 400) == "invalid_json"


@pytest.mark.parametrize(
    "digit", ["²", "\u0661", "\u0663", "-1", "1e3", " 1"]
)  # superscript, Arabic-Indic
def test_only_ascii_digits_are_numbers(client: TestClient, digit: str) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    events = f"/agents/demo/contexts/{context_id}/events"
    assert code_of(client.get(events, params={"after": digit}), 400) == "invalid_request"
    # As a browser or a hostile client sends them: UTF-8 bytes in the header.
    last_event_id = {"last-event-id": digit.encode()}
    assert code_of(client.get(events, headers=last_event_id), 400) == "invalid_request"
    state = f"/admin/agents/demo/contexts/{context_id}/state"
    headers = {**OPERATOR, "if-match": f'"{digit}"'.encode()}
    patch = client.patch(state, json={"state": {"notes": "x"}}, headers=headers)
    assert code_of(patch, 400) == "invalid_request"


def test_a_seq_past_what_a_client_can_count_is_refused(client: TestClient) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    events = f"/agents/demo/contexts/{context_id}/events"
    assert code_of(client.get(events, params={"after": str(2**63)}), 400) == "invalid_request"
    with client.websocket_connect("/agents/demo/ws") as socket:
        socket.send_json({"type": "attach", "contextId": context_id, "after": 2**63})
        assert socket.receive_json()["code"] == "invalid_request"
        socket.send_json({"type": "attach", "contextId": context_id, "after": 0})
        assert socket.receive_json()["type"] == "run_start"  # the socket goes on


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "attach", "contextId": "ctx-\\ud800", "requestId": "r-1"}',
        '{"type": "stop", "contextId": "\\udfff\\ud800", "requestId": "r-1"}',
        '{"type": "send", "contextId": "ctx-\\u0000", "message": {"text": "x"}, "requestId": "r-1"}',
    ],
)
def test_every_websocket_command_gets_an_answer(client: TestClient, text: str) -> None:
    with client.websocket_connect("/agents/demo/ws") as socket:
        socket.send_text(text)
        refused = socket.receive_json()
        assert refused["type"] == "rejected" and refused["requestId"] == "r-1"
        assert refused["code"] == "invalid_context_id" and refused["contextId"] is None
        socket.send_json({"type": "send", "message": {"text": "still here"}})
        assert socket.receive_json()["type"] == "run_start"


def test_websocket_integers_of_thousands_of_digits_close_the_socket(client: TestClient) -> None:
    with client.websocket_connect("/agents/demo/ws") as socket:
        socket.send_text(f'{{"type": "attach", "contextId": "ctx-x", "after": {HUGE}}}')
        assert socket.receive_json()["code"] == "invalid_json"
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_json()
    assert closed.value.code == 1007


class Flaky(Agent):
    """Made once at startup; every later instance fails, its message holding a secret."""

    made = 0

    def __init__(self) -> None:
        type(self).made += 1
        if type(self).made > 1:
            raise ThinwireError("internal_error", "bad upstream key sk-live-123456")


def test_an_agent_that_cannot_be_created_is_sanitized_like_a_failing_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    Flaky.made = 0
    with TestClient(app_for({"demo": Flaky})) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
        assert code_of(response, 500) == "agent_error"
        assert "sk-live" not in response.text
        assert "Reference: err-" in response.json()["error"]["message"]
        with client.websocket_connect("/agents/demo/ws") as socket:
            socket.send_json({"type": "send", "message": {"text": "hi"}})
            refused = socket.receive_json()
        assert refused["code"] == "agent_error" and "sk-live" not in json.dumps(refused)
    assert "sk-live-123456" in caplog.text  # …where the operator can find it


def failing_store(path: Path) -> SQLiteStore:
    """A SQLite store whose every commit fails like an unwritable file."""
    store = SQLiteStore(path)

    def fail(works: list[Any], fsync: bool) -> list[Any]:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    store._database._commit = fail  # type: ignore[method-assign]
    return store


def test_a_failing_store_answers_503_with_retry_after(tmp_path: Path) -> None:
    store = failing_store(tmp_path / "t.db")
    with TestClient(app_for({"demo": DemoAgent}, store=store)) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
        assert code_of(response, 503) == "store_unavailable"
        assert response.json()["error"]["retryable"] is True
        assert response.headers["retry-after"] == "1"
        assert "readonly" not in response.text  # what SQLite said stays in the log
        assert client.get("/healthz").status_code == 200  # alive…
        with client.websocket_connect("/agents/demo/ws") as socket:
            socket.send_json({"type": "send", "message": {"text": "hi"}, "requestId": "r-1"})
            refused = socket.receive_json()
        assert (refused["code"], refused["retryable"], refused["requestId"]) == (
            "store_unavailable",
            True,
            "r-1",
        )


def test_readyz_says_whether_the_store_answers(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    with TestClient(app_for({"demo": DemoAgent}, store=store)) as client:
        assert client.get("/readyz").json() == {"ok": True}

        def unreadable(work: Any) -> Any:
            raise sqlite3.OperationalError("unable to open database file")

        store._database._read = unreadable  # type: ignore[method-assign]
        response = client.get("/readyz")
        assert code_of(response, 503) == "store_unavailable"
        assert client.get("/healthz").status_code == 200


class Broken(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("fine")


def test_a_bug_outside_the_tree_is_a_typed_500(monkeypatch: pytest.MonkeyPatch) -> None:
    app = app_for({"demo": Broken})

    async def crash(*args: object, **kwargs: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(app.state.thinwire, "read_transcript", crash)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/agents/demo/contexts/ctx-" + "0" * 36)
    assert code_of(response, 500) == "internal_error"
    assert "a bug" not in response.text and "Reference: err-" in response.text


@pytest.mark.anyio
async def test_a_body_that_trickles_in_times_out() -> None:
    async def never() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"content-type", b"application/json")],
    }
    with pytest.raises(RequestTimeout) as late:
        await read_json(Request(scope, never), 1024, timeout=0.05)
    assert (late.value.status, late.value.code) == (408, "request_timeout")
    # What is left of the body would be read as the next request: the connection goes.
    assert error_response(late.value).headers["connection"] == "close"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("/agents/demo/runs", {"message": {"text": "hi"}, "data": nested(500)}),
        ("/ai-sdk/demo/chat", {"id": "c", "message": {"role": "user", "parts": [nested(500)]}}),
        (
            "/ag-ui/demo",
            {
                "threadId": "t",
                "runId": "r",
                "messages": [{"id": "m", "role": "user", "content": "hi"}],
                "tools": [],
                "context": [],
                "state": {},
                "forwardedProps": nested(500),
            },
        ),
    ],
)
def test_json_nested_too_deep_is_refused_before_it_reaches_a_run(
    client: TestClient, url: str, body: dict[str, Any]
) -> None:
    # Deep enough to overflow the copies and checks of a run, well under the size limit.
    assert code_of(client.post(url, json=body), 400) == "invalid_json"
    assert send(client, "still here")[-1]["stopReason"] == "end"


def test_json_nested_as_deep_as_allowed_runs(client: TestClient) -> None:
    frames = client.post(
        "/agents/demo/runs", json={"message": {"text": "hi"}, "data": nested(MAX_DEPTH - 1)}
    )
    assert frames.status_code == 200 and '"stopReason":"end"' in frames.text


def test_a_websocket_command_nested_too_deep_is_refused(client: TestClient) -> None:
    with client.websocket_connect("/agents/demo/ws") as socket:
        socket.send_json({"type": "send", "message": {"text": "hi"}, "data": nested(500)})
        assert socket.receive_json()["code"] == "invalid_json"


FIRST_AND_SECOND = '{"message": {"text": "first"}, "message": {"text": "second"}}'


@pytest.mark.parametrize(
    ("url", "body", "key"),
    [
        ("/agents/demo/runs", FIRST_AND_SECOND, "message"),
        ("/agents/demo/runs", '{"message": {"text": "first", "text": "second"}}', "text"),
        (
            "/agents/demo/runs",
            '{"message": {"text": "hi"}, "data": {"rows": [{"n": 1}, {"n": 1, "n": 2}]}}',
            "n",
        ),
        (
            "/ai-sdk/demo/chat",
            '{"id": "c", "message": {"role": "user", "parts": [{"type": "text", "text": "first"}],'
            ' "parts": [{"type": "text", "text": "second"}]}}',
            "parts",
        ),
        (
            "/ag-ui/demo",
            '{"threadId": "t", "runId": "r", "tools": [], "context": [], "state": {},'
            ' "forwardedProps": {}, "messages": [{"id": "m", "role": "user", "content": "first",'
            ' "content": "second"}]}',
            "content",
        ),
    ],
    ids=["top", "nested", "in-data", "ai-sdk", "ag-ui"],
)
def test_a_key_given_twice_is_invalid_json_at_any_depth(
    client: TestClient, url: str, body: str, key: str
) -> None:
    """Strict JSON: a proxy or filter that reads the first of two keys would see another
    request than the agent, which would get the last."""
    refused = client.post(url, content=body, headers={"content-type": "application/json"})
    assert code_of(refused, 400) == "invalid_json"
    assert f"{key!r}" in refused.json()["error"]["message"]
    assert client.get("/agents/demo/contexts").json()["conversations"] == []  # no run began


def test_a_key_given_twice_is_refused_by_the_operator_api_a2a_and_the_websocket(
    client: TestClient,
) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    patch = '{"state": {"notes": "first", "notes": "second"}}'
    url = f"/admin/agents/demo/contexts/{context_id}/state"
    headers = {"content-type": "application/json", **OPERATOR}
    assert code_of(client.patch(url, content=patch, headers=headers), 400) == "invalid_json"
    call = '{"jsonrpc": "2.0", "id": "x", "method": "ListTasks", "params": {}, "method": "GetTask"}'
    headers = {"content-type": "application/json", "A2A-Version": "1.0"}
    error = client.post("/a2a/demo", content=call, headers=headers).json()["error"]
    assert error["code"] == -32700 and "'method'" in error["message"]
    with client.websocket_connect("/agents/demo/ws") as socket:
        socket.send_text('{"type": "send", "message": {"text": "first"}, "type": "attach"}')
        refused = socket.receive_json()
        assert refused["code"] == "invalid_json" and "'type'" in refused["message"]
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_json()
    assert closed.value.code == 1007
    assert len(client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]) == 2


#: A key as a hostile client may write one: an override, a NUL, markup.
SPOOFING_KEY = "\u202egnp.exe\u0000<script>"


@pytest.mark.parametrize(
    ("key", "quoted"),
    [
        ("k" * 250_000, repr("k" * 64) + "…"),
        (SPOOFING_KEY, "'\\u202egnp.exe\\x00<script>'"),
    ],
    ids=["long", "spoofing"],
)
def test_an_error_quotes_a_clients_key_short_and_escaped(
    client: TestClient, key: str, quoted: str
) -> None:
    """What the client wrote, the error names (so it can find it), but cut and with the
    characters a reader does not see as escapes: over HTTP, the WebSocket and A2A alike."""
    body = {"message": {"text": "hi", key: 1}}
    refused = client.post("/agents/demo/runs", json=body)
    assert code_of(refused, 400) == "invalid_request"
    said = refused.json()["error"]["message"]
    assert said.startswith(f"message[{quoted}]: ") and len(said) < 500, said[:300]
    with client.websocket_connect("/agents/demo/ws") as socket:
        socket.send_json({"type": "send", **body})
        rejected = socket.receive_json()
    assert rejected["message"] == said
    assert "\u202e" not in said and "\x00" not in said


class Tree(BaseModel):
    model_config = ConfigDict(extra="forbid")
    children: dict[str, Tree] = {}


def test_a_path_of_many_steps_gives_a_bounded_message() -> None:
    """Keys each cut, and as many of them as nesting allows: the message is cut too."""
    given: Any = {"unknown": 1}
    for _ in range(20):
        given = {"children": {"k" * 100: given}}
    with pytest.raises(BadRequest) as refused:
        validated(Tree, given)
    said = refused.value.message
    assert said.startswith(f"children[{'k' * 64!r}…].children[") and said.endswith("…")
    assert len(said) == MAX_MESSAGE


def test_the_history_of_a_long_or_spoofing_key_quotes_it_short_and_escaped(
    client: TestClient,
) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    for key, quoted in (("x" * 5000, repr("x" * 64) + "…"), ("\u202ekey", "'\\u202ekey'")):
        url = f"/admin/agents/demo/contexts/{context_id}/state/{quote(key, safe='')}/history"
        refused = client.get(url, headers=OPERATOR)
        assert code_of(refused, 400) == "invalid_state_value"
        said = refused.json()["error"]["message"]
        assert f"key {quoted} is not a key name" in said and len(said) < 500, said[:300]


def test_a_path_no_route_takes_is_quoted_short_and_escaped(client: TestClient) -> None:
    refused = client.get("/%E2%80%AEnimda/%07x" + "a" * 5000)
    assert code_of(refused, 404) == "not_found"
    said = refused.json()["error"]["message"]
    assert said.startswith("no route for '/\\u202enimda/\\x07xaaa") and said.endswith("'…")
    assert said.isprintable() and len(said) < 300
