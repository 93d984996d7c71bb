"""Browser-facing defences: cross-site state changes refused, security headers sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse

from conftest import app_for, send
from thinwire.demo import DemoAgent
from thinwire.web import API_PREFIXES

EVIL = "https://evil.example"
OWN = "http://testserver"


@pytest.fixture
def web(tmp_path: Path) -> Path:
    """The page's directory, for a test to add files to."""
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>mine</title>")
    return web


@pytest.fixture
def client(web: Path) -> TestClient:
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
        pytest.raises(WebSocketDenialResponse) as denied,
        client.websocket_connect(url, headers={"origin": "https://testserver"}) as socket,
    ):
        socket.receive_text()
    assert refused(denied.value)
    with client.websocket_connect(url, headers={"origin": OWN}) as socket:
        socket.send_json({"type": "send", "message": {"text": "hi"}})
        assert socket.receive_json()["type"] == "run_start"


HTML = {"accept": "text/html"}


def missing(response: Any) -> bool:
    """Answered as a path that names no file is: the typed 404."""
    return response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_the_pages_dotfiles_are_missing_files_but_well_known_is_served(
    client: TestClient, web: Path
) -> None:
    """A build directory may hold a `.env` or a `.git`; a site never means to serve them."""
    (web / ".env").write_text("SECRET=tw-dotfile-canary")
    (web / ".git").mkdir()
    (web / ".git" / "config").write_text("[remote] tw-dotfile-canary")
    (web / "assets").mkdir()
    (web / "assets" / ".secret.js").write_text("tw-dotfile-canary")
    (web / ".well-known").mkdir()
    (web / ".well-known" / "security.txt").write_text("Contact: mailto:security@example.com")
    (web / ".well-known" / ".hidden").write_text("tw-dotfile-canary")
    hidden = ["/.env", "/%2eenv", "/.git/config", "/.git/", "/assets/.secret.js"]
    for path in [*hidden, "/.well-known/.hidden"]:
        answer = client.get(path)
        assert missing(answer), path
        assert "tw-dotfile-canary" not in answer.text
        # A browser's navigation gets what it gets for any path that names no file.
        assert "tw-dotfile-canary" not in client.get(path, headers=HTML).text
    assert (
        client.get("/.git/config", headers=HTML).text == client.get("/no/config", headers=HTML).text
    )
    assert missing(client.get("/.env", headers=HTML))  # a dotted name: no page either
    served = client.get("/.well-known/security.txt")
    assert served.status_code == 200 and served.text.startswith("Contact:")
    # Nor is a file outside the directory a symlink points at.
    (web.parent / "outside.txt").write_text("tw-dotfile-canary")
    (web / "outside.txt").symlink_to(web.parent / "outside.txt")
    assert missing(client.get("/outside.txt"))


def test_every_file_of_the_page_carries_the_pages_security_headers(
    client: TestClient, web: Path
) -> None:
    """An SVG (or any file a browser renders) opened directly runs its script on this
    origin unless the page's policy comes with it."""
    (web / "x.svg").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script></svg>'
    )
    (web / "app.js").write_text("console.log(1)")
    page = client.get("/", headers=HTML)
    for path in ("/x.svg", "/app.js"):
        served = client.get(path)
        assert served.status_code == 200, path
        for header in ("content-security-policy", "x-frame-options", "x-content-type-options"):
            assert served.headers[header] == page.headers[header], (path, header)
    assert client.get("/x.svg").headers["content-type"] == "image/svg+xml"
    assert "cache-control" not in client.get("/app.js").headers  # the page's own, not its assets'


@pytest.mark.parametrize("prefix", API_PREFIXES)
def test_the_api_prefixes_without_their_slash_are_not_the_pages(
    client: TestClient, prefix: str
) -> None:
    """Answered as any unknown API path is, not with the page's index.html."""
    assert missing(client.get(prefix + "x/y", headers=HTML))
    for path in (prefix.rstrip("/"), prefix):
        assert missing(client.get(path, headers=HTML)), path
        assert missing(client.get(path)), path
    # Another path that only begins like one is the page's, as is another case's.
    assert "<title>mine</title>" in client.get(prefix.rstrip("/") + "x", headers=HTML).text
    assert "<title>mine</title>" in client.get(prefix.upper() + "x", headers=HTML).text
