"""A context belongs to the principal that created it; a context id is not identity."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import HTTPConnection
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from conftest import app_for, parse_sse, server_context
from thinwire import MemoryStore
from thinwire.demo import COOKIE, DemoAgent, create_demo_app
from thinwire.identity import SignedValue


def by_header(connection: HTTPConnection) -> str | None:
    return connection.headers.get("x-user")


async def by_header_async(connection: HTTPConnection) -> str | None:
    return connection.headers.get("x-user")


ADA = {"x-user": "ada"}
EVE = {"x-user": "eve"}
UNKNOWN = "ctx-" + "0" * 36


@pytest.fixture(params=[by_header, by_header_async], ids=["sync", "async"])
def client(request: pytest.FixtureRequest) -> Any:
    with TestClient(app_for({"demo": DemoAgent}, identify=request.param)) as test_client:
        yield test_client


def start(client: TestClient, headers: dict[str, str]) -> str:
    response = client.post(
        "/agents/demo/runs", json={"message": {"text": "private"}}, headers=headers
    )
    assert response.status_code == 200
    return str(parse_sse(response.text)[0]["contextId"])


TURN = "turn-000000000000-u0"


def probes(context_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Every route that names a context: read, rename, send, attach, stop, decide,
    regenerate, edit, branch, clear, forget."""
    base = f"/agents/demo/contexts/{context_id}"
    return [
        ("GET", base, None),
        ("PATCH", base, {"title": "mine now"}),
        ("POST", f"{base}/regenerate", {}),
        ("POST", f"{base}/edits", {"turnId": TURN, "message": {"text": "x"}}),
        ("POST", f"{base}/branch", {"turnId": TURN, "index": 0}),
        ("POST", "/agents/demo/runs", {"contextId": context_id, "message": {"text": "hi"}}),
        ("GET", f"{base}/events", None),
        ("POST", f"{base}/stop", None),
        ("POST", f"{base}/decisions", {"interruptId": "int-" + "0" * 24, "value": "approve"}),
        ("POST", f"{base}/clear", None),
        ("DELETE", base, None),
    ]


def test_another_principal_gets_exactly_what_a_missing_id_gets(client: TestClient) -> None:
    context_id = start(client, ADA)
    for (method, url, body), (_, missing_url, missing_body) in zip(
        probes(context_id), probes(UNKNOWN), strict=True
    ):
        foreign = client.request(method, url, json=body, headers=EVE)
        missing = client.request(method, missing_url, json=missing_body, headers=EVE)
        assert foreign.status_code == missing.status_code == 404, (method, url)
        assert missing.json()["error"]["code"] == "context_not_found"
        # Byte for byte, but for the id the message repeats; every header, name and value
        # (none here differs from one request to the next, as a real server's Date would).
        same = foreign.content.replace(context_id.encode(), UNKNOWN.encode())
        assert same == missing.content, (method, url)
        assert foreign.headers.multi_items() == missing.headers.multi_items(), (method, url)
    assert_untouched(client, context_id)


def assert_untouched(client: TestClient, context_id: str) -> None:
    """The owner's conversation is as it began."""
    transcript = client.get(f"/agents/demo/contexts/{context_id}", headers=ADA).json()
    assert transcript["turns"][0]["text"] == "private"
    assert len(transcript["turns"]) == 2


def commands(context_id: str) -> list[dict[str, Any]]:
    """Every WebSocket command that names a context: send, attach, stop, decide,
    regenerate, edit."""
    return [
        {"type": "send", "contextId": context_id, "message": {"text": "hi"}},
        {"type": "attach", "contextId": context_id},
        {"type": "stop", "contextId": context_id},
        {
            "type": "decide",
            "contextId": context_id,
            "interruptId": "int-" + "0" * 24,
            "value": "approve",
        },
        {"type": "regenerate", "contextId": context_id},
        {"type": "edit", "contextId": context_id, "turnId": TURN, "message": {"text": "x"}},
    ]


def test_another_principal_gets_exactly_the_rejection_of_a_missing_id_on_the_websocket(
    client: TestClient,
) -> None:
    context_id = start(client, ADA)
    with client.websocket_connect("/agents/demo/ws", headers=EVE) as socket:
        for foreign, missing in zip(commands(context_id), commands(UNKNOWN), strict=True):
            socket.send_json({**foreign, "requestId": "r-1"})
            refused = socket.receive_text()
            socket.send_json({**missing, "requestId": "r-1"})
            expected = socket.receive_text()
            frame = json.loads(expected)
            assert (frame["type"], frame["code"]) == ("rejected", "context_not_found")
            assert frame["command"] == foreign["type"]
            assert refused.replace(context_id, UNKNOWN) == expected, foreign["type"]
    assert_untouched(client, context_id)


def test_unauthenticated_requests_are_401(client: TestClient) -> None:
    context_id = start(client, ADA)
    for method, url, body in probes(context_id):
        response = client.request(method, url, json=body)
        assert response.status_code == 401, (method, url)
        assert response.json()["error"]["code"] == "unauthenticated"
    for method, url in (("POST", "/agents/demo/runs"), ("GET", "/agents/demo/contexts")):
        response = client.request(method, url, json={"message": {"text": "hi"}})
        assert response.status_code == 401, url


def test_a_principal_that_is_not_text_is_refused_not_stored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A database's integer user id would own a conversation that a restart gives to
    its string: identify must say who is asking as text."""
    app = app_for({"demo": DemoAgent}, identify=lambda connection: 1)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
        listed = client.get("/agents/demo/contexts")
    assert response.status_code == listed.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "identify must return the principal as a str (or None), not int" in caplog.text


def test_an_identify_that_raises_is_a_typed_error_on_every_face(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The app's bug is logged under a reference and answered in each face's own shape;
    no exception reaches the server, which would drop the connection (TestClient raises
    any that does)."""

    def identify(connection: HTTPConnection) -> str:
        raise RuntimeError("tw-identify-secret-3c1d")

    with TestClient(app_for({"demo": DemoAgent}, identify=identify)) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
        assert response.status_code == 500
        error = response.json()["error"]
        assert error["code"] == "internal_error" and "Reference: err-" in error["message"]
        with client.websocket_connect("/agents/demo/ws") as socket:
            assert socket.receive_json()["code"] == "internal_error"
            with pytest.raises(WebSocketDisconnect) as closed:
                socket.receive_json()
        assert closed.value.code == 1011
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
        a2a = client.post("/a2a/demo", json=rpc, headers={"A2A-Version": "1.0"})
        assert a2a.status_code == 200 and a2a.json()["error"]["code"] == -32603
    for answer in (response.text, a2a.text):
        assert "tw-identify-secret-3c1d" not in answer
    assert "tw-identify-secret-3c1d" in caplog.text  # in the log, under its reference


def test_contexts_record_their_owner(client: TestClient) -> None:
    context_id = start(client, ADA)
    assert server_context(client, context_id).record.owner == "ada"
    second = client.post(
        "/agents/demo/runs",
        json={"contextId": context_id, "message": {"text": "again"}},
        headers=ADA,
    )
    assert parse_sse(second.text)[-1]["stopReason"] == "end"


def test_the_demo_treats_a_forged_cookie_as_unauthenticated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its cookie names the user, signed: one not signed with the demo's secret is no user
    (not the guest either), on every route and the WebSocket."""
    monkeypatch.delenv("THINWIRE_DEMO_SECRET", raising=False)
    app = create_demo_app(delay=0, store=MemoryStore(), data_dir=tmp_path)
    with TestClient(app) as client:
        assert client.post("/demo/login", json={"user": "alice"}).status_code == 200
        signed = client.cookies[COOKIE]
        context_id = start(client, {})
        client.cookies.clear()
        value, _, signature = signed.rpartition(".")
        forged = {
            "tampered": f"{value}.{signature[:-1]}{'0' if signature[-1] != '0' else '1'}",
            "another user's name": f"bob.{signature}",
            "another secret's": SignedValue(b"not the demo's secret").sign("alice"),
            "unsigned": "alice",
            "empty": "",
        }
        routes = [
            *probes(context_id),
            ("GET", "/agents/demo/contexts", None),
            ("POST", "/agents/demo/tickets", None),
        ]
        for what, cookie in forged.items():
            headers = {"cookie": f"{COOKIE}={cookie}"}
            for method, url, body in routes:
                response = client.request(method, url, json=body, headers=headers)
                assert response.status_code == 401, (what, method, url)
                assert response.json()["error"]["code"] == "unauthenticated"
            with (
                pytest.raises(WebSocketDisconnect) as closed,
                client.websocket_connect("/agents/demo/ws", headers=headers) as socket,
            ):
                assert socket.receive_json()["code"] == "unauthenticated"
                socket.receive_json()
            assert closed.value.code == 4401, what
        # The cookie as signed still names alice, whose conversation is as it was.
        own = client.get(
            f"/agents/demo/contexts/{context_id}", headers={"cookie": f"{COOKIE}={signed}"}
        )
        assert own.status_code == 200 and own.json()["turns"][0]["text"] == "private"
