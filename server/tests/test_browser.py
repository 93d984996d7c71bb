"""Browser-facing defences: cross-site state changes refused, security headers sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from conftest import app_for, send
from thinwire.demo import DemoAgent

EVIL = "https://evil.example"
OWN = "http://testserver"


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>mine</title>")
    app = app_for({"demo": DemoAgent}, web_dir=web, allowed_origins=["https://app.example"])
    return TestClient(app)


def refused(response: object) -> bool:
    status = getattr(response, "status_code", None)
    body = getattr(response, "json", lambda: {})()
    return status == 403 and body["error"]["code"] == "origin_not_allowed"


def test_every_state_changing_route_refuses_another_sites_page(client: TestClient) -> None:
    context_id = send(client, "hello")[0]["contextId"]
    base = f"/agents/demo/contexts/{context_id}"
    # The body-less text/plain POSTs a form or a no-cors fetch of another site can send.
    plain = {"origin": EVIL, "content-type": "text/plain"}
    assert refused(client.post(f"{base}/stop", headers=plain))
    assert refused(client.post(f"{base}/clear", headers=plain))
    assert refused(client.delete(base, headers={"origin": EVIL}))
    run = {"message": {"text": "hi"}, "contextId": context_id}
    assert refused(client.post("/agents/demo/runs", json=run, headers={"origin": EVIL}))
    decision = {"interruptId": "int-1", "value": "approve"}
    assert refused(client.post(f"{base}/decisions", json=decision, headers={"origin": EVIL}))
    # Nothing happened: the conversation is still there, with its two turns.
    assert len(client.get(base).json()["turns"]) == 2


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "null"},  # a sandboxed frame, a file:// page
        {"origin": "https://testserver"},  # the same host, another scheme
        {"origin": "http://testserver:8080"},  # another port
        {"sec-fetch-site": "cross-site"},  # a browser that left Origin out
        {"sec-fetch-site": "same-site"},  # a sibling subdomain is another origin
    ],
)
def test_near_misses_are_other_origins(client: TestClient, headers: dict[str, str]) -> None:
    body = {"message": {"text": "hi"}}
    assert refused(client.post("/agents/demo/runs", json=body, headers=headers))


@pytest.mark.parametrize(
    "headers",
    [
        {},  # curl, a server: no ambient cookies at stake
        {"origin": OWN},
        {"origin": OWN + "/", "sec-fetch-site": "same-origin"},
        {"origin": "https://APP.example"},  # listed in allowed_origins
        {"sec-fetch-site": "same-origin"},
        {"sec-fetch-site": "none"},  # typed into the address bar
    ],
)
def test_own_pages_allowed_sites_and_non_browsers_pass(
    client: TestClient, headers: dict[str, str]
) -> None:
    response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}}, headers=headers)
    assert response.status_code == 200, response.text


def test_reads_are_not_state_changes(client: TestClient) -> None:
    assert client.get("/healthz", headers={"origin": EVIL}).status_code == 200


def test_the_page_and_every_response_carry_security_headers(client: TestClient) -> None:
    page = client.get("/", headers={"accept": "text/html"})
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert "'unsafe-inline'" not in csp
    assert page.headers["x-frame-options"] == "DENY"
    for response in (page, client.get("/healthz"), client.get("/agents/demo/contexts/x")):
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "no-referrer"


def test_a_websocket_from_another_scheme_is_refused(client: TestClient) -> None:
    url = "/agents/demo/ws"
    with (
        pytest.raises(WebSocketDisconnect) as closed,
        client.websocket_connect(url, headers={"origin": "https://testserver"}) as socket,
    ):
        socket.receive_text()
    assert closed.value.code == 4403
    with client.websocket_connect(url, headers={"origin": OWN}) as socket:
        socket.send_json({"type": "send", "message": {"text": "hi"}})
        assert socket.receive_json()["type"] == "run_start"
