from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import app_for, send
from thinwire.codes import RETRYABLE_CODES
from thinwire.demo import DemoAgent
from thinwire.errors import BadRequest
from thinwire.parsing import check_message

RUNS = "/agents/demo/runs"


def error_of(response: Any, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "retryable"}
    assert body["error"]["code"] == code
    assert body["error"]["retryable"] is (code in RETRYABLE_CODES)
    assert body["error"]["message"]
    return str(body["error"]["message"])


JSON = {"content-type": "application/json"}


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"{not json", "invalid_json"),
        (b"", "invalid_json"),
        (b"\xff\xfe\x00", "invalid_json"),
        (b"[" * 100_000 + b"]" * 100_000, "invalid_json"),
        (b"[]", "invalid_request"),
        (b"{}", "invalid_request"),
        (b'{"message": {}}', "invalid_request"),
        (b'{"message": {"text": ""}}', "invalid_request"),
        (b'{"message": {"text": "   \\n"}}', "invalid_request"),
        (b'{"message": {"text": 5}}', "invalid_request"),
        (b'{"message": {"text": "\\ud800"}}', "invalid_request"),
        (b'{"message": {"text": "hi"}, "extra": 1}', "invalid_request"),
        (b'{"message": {"text": "hi"}, "contextId": 7}', "invalid_request"),
    ],
)
def test_malformed_bodies_get_400(client: TestClient, content: bytes, code: str) -> None:
    error_of(client.post(RUNS, content=content, headers=JSON), 400, code)


def test_a_message_of_nothing_a_reader_sees_is_blank(client: TestClient) -> None:
    """As a title is: zero-width and format characters, bidi controls, any space."""
    for text in ("\u200b\u200b", "\ufeff\u2060\u00a0", "\u202e\u202c\u200f", "\u3000\n"):
        message = error_of(
            client.post(RUNS, json={"message": {"text": text}}), 400, "invalid_request"
        )
        assert message == "message.text: must not be blank", ascii(text)
    # A face whose JSON keeps a lone surrogate (A2A's) is told what is wrong with it.
    with pytest.raises(BadRequest, match="not valid Unicode"):
        check_message("\ud800", 100)
    assert send(client, "\u200bhi")[-1]["stopReason"] == "end"  # something to see


def test_wrong_content_type_gets_415(client: TestClient) -> None:
    response = client.post(
        RUNS, content=b'{"message":{"text":"hi"}}', headers={"content-type": "text/plain"}
    )
    error_of(response, 415, "unsupported_media_type")


@pytest.mark.parametrize("action", ["stop", "clear"])
def test_a_stop_or_a_clear_takes_no_body_or_an_empty_object(
    client: TestClient, action: str
) -> None:
    """They take no fields, and check their body as every other request does; what
    clients send — nothing (`fetch`, `curl -X POST`) or `{}` — is taken."""
    url = f"/agents/demo/contexts/{send(client, 'hi')[0]['contextId']}/{action}"
    error_of(client.post(url, json={"x": 1}), 400, "invalid_request")
    error_of(client.post(url, json=[]), 400, "invalid_request")
    error_of(client.post(url, content=b"not json", headers=JSON), 400, "invalid_json")
    plain = {"content-type": "text/plain"}
    error_of(client.post(url, content=b"{}", headers=plain), 415, "unsupported_media_type")
    for taken in ({}, {"json": {}}, {"headers": JSON}, {"content": b"", "headers": plain}):
        assert client.post(url, **taken).status_code == 200, taken  # type: ignore[arg-type]


def test_message_over_the_limit_gets_413(client: TestClient) -> None:
    at_limit = "a" * 32 * 1024
    assert send(client, at_limit)[-1]["type"] == "done"
    error_of(
        client.post(RUNS, json={"message": {"text": at_limit + "a"}}), 413, "message_too_large"
    )
    # The limit counts UTF-8 bytes, not characters.
    error_of(client.post(RUNS, json={"message": {"text": "é" * 16385}}), 413, "message_too_large")


def test_message_limit_is_configurable() -> None:
    app = app_for({"demo": DemoAgent}, max_message_bytes=10)
    with TestClient(app) as small:
        error_of(
            small.post(RUNS, json={"message": {"text": "eleven char"}}), 413, "message_too_large"
        )
        assert small.post(RUNS, json={"message": {"text": "ten chars!"}}).status_code == 200


def test_oversized_body_is_refused_without_reading_it_all(client: TestClient) -> None:
    huge = b'{"message": {"text": "' + b"a" * 1_000_000 + b'"}}'
    error_of(client.post(RUNS, content=huge, headers=JSON), 413, "body_too_large")


@pytest.mark.parametrize(
    "context_id",
    ["ctx-../../etc/passwd", "ctx-" + "A" * 36, "ctx-" + "a" * 37, "x" * 5000, "", "ctx-abc"],
)
def test_malformed_context_ids_get_400(client: TestClient, context_id: str) -> None:
    body = {"contextId": context_id, "message": {"text": "hi"}}
    error_of(client.post(RUNS, json=body), 400, "invalid_context_id")


def test_malformed_context_id_in_path_gets_400(client: TestClient) -> None:
    error_of(client.get("/agents/demo/contexts/ctx-..secret"), 400, "invalid_context_id")
    # An encoded slash makes it another path: still a typed answer, never a file.
    error_of(client.get("/agents/demo/contexts/ctx-..%2F..%2Fetc"), 404, "not_found")


def test_unknown_context_gets_404_and_creates_nothing(client: TestClient) -> None:
    unknown = "ctx-" + "0" * 36
    body = {"contextId": unknown, "message": {"text": "hi"}}
    error_of(client.post(RUNS, json=body), 404, "context_not_found")
    error_of(client.get(f"/agents/demo/contexts/{unknown}"), 404, "context_not_found")
    assert len(client.app.state.thinwire.contexts) == 0  # type: ignore[attr-defined]


def test_unknown_agent_gets_404(client: TestClient) -> None:
    error_of(
        client.post("/agents/nobody/runs", json={"message": {"text": "hi"}}), 404, "agent_not_found"
    )
    context_id = send(client, "hi")[0]["contextId"]
    error_of(client.get(f"/agents/nobody/contexts/{context_id}"), 404, "agent_not_found")


def test_context_of_another_agent_is_not_found() -> None:
    app = app_for({"demo": DemoAgent, "other": DemoAgent})
    with TestClient(app) as client:
        context_id = send(client, "hi")[0]["contextId"]
        error_of(client.get(f"/agents/other/contexts/{context_id}"), 404, "context_not_found")


def test_protocol_mismatch_is_a_clear_error(client: TestClient) -> None:
    response = client.post(
        RUNS, json={"message": {"text": "hi"}}, headers={"Thinwire-Protocol": "2"}
    )
    assert "'2'" in error_of(response, 400, "protocol_mismatch")
    ok = client.post(RUNS, json={"message": {"text": "hi"}}, headers={"Thinwire-Protocol": "1"})
    assert ok.status_code == 200
    # Named twice, whatever the order: each must be this server's.
    for versions in (["1", "2"], ["2", "1"]):
        both = client.post(
            RUNS,
            json={"message": {"text": "hi"}},
            headers=[("Thinwire-Protocol", version) for version in versions],
        )
        assert "'2'" in error_of(both, 400, "protocol_mismatch")


def test_unknown_routes_and_methods_are_typed(client: TestClient) -> None:
    error_of(client.get("/nope"), 404, "not_found")
    wrong_method = client.get(RUNS)
    error_of(wrong_method, 405, "method_not_allowed")
    assert wrong_method.headers["allow"] == "POST"  # as HTTP requires of a 405
    # Every method of the path, though each has a route of its own.
    conversation = client.put(f"/agents/demo/contexts/ctx-{'0' * 36}")
    assert conversation.headers["allow"] == "DELETE, GET, HEAD, PATCH"
