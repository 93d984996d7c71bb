"""A thinwire app inside another app: mounted with its lifespan, its page and its
OpenAPI document under the prefix; tickets for header-authenticated WebSockets; the page's
data reaching the agent."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import HTTPConnection
from starlette.routing import Route
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from conftest import app_for, parse_sse
from thinwire import Agent, Run, mount


class Remembering(Agent):
    """Says what the page sent; `seen` keeps every run's data, for the assertions."""

    seen: ClassVar[list[dict[str, Any]]] = []

    async def run(self, run: Run, text: str) -> None:
        type(self).seen.append(run.data)
        await run.say(f"{text} on {run.data.get('page', 'no page')}")


def parent(kind: str) -> Starlette:
    if kind == "fastapi":
        app: Starlette = FastAPI()

        @app.get("/own")  # type: ignore[attr-defined, untyped-decorator]
        def own() -> dict[str, bool]:
            return {"own": True}

        return app

    async def own(request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse({"own": True})

    return Starlette(routes=[Route("/own", own)])


@pytest.mark.parametrize("kind", ["fastapi", "starlette"])
def test_a_mounted_app_starts_and_stops_with_its_parent(kind: str, tmp_path: Path) -> None:
    web = tmp_path / "web"
    web.mkdir()
    (web / "index.html").write_text("<!doctype html><title>My own app</title>")
    agents = app_for({"demo": Remembering}, web_dir=web)
    server = agents.state.thinwire
    app = parent(kind)
    mount(app, "/api", agents)
    with TestClient(app) as client:
        assert server.tickets is not None  # its startup ran
        assert client.get("/own").json() == {"own": True}
        assert client.get("/api/healthz").json() == {"ok": True}
        frames = parse_sse(
            client.post("/api/agents/demo/runs", json={"message": {"text": "hi"}}).text
        )
        assert frames[-1]["stopReason"] == "end"
        document = client.get("/api/openapi.json").json()
        assert document["servers"] == [{"url": "/api"}]
        page = client.get("/api/", headers={"accept": "text/html"})
        assert "<title>My own app</title>" in page.text  # the app's page, title and all
        assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        route = client.get("/api/settings/profile", headers={"accept": "text/html"})
        assert route.status_code == 200 and "My own app" in route.text  # a client route
        assert client.get("/api/missing.js").status_code == 404  # a missing file is not
        assert client.get("/api/agents/demo/runs").status_code == 405  # nor the API
    assert server.closing.is_set()  # …and its shutdown ran


def test_the_page_sends_data_the_agent_reads_and_a_resume_keeps() -> None:
    Remembering.seen = []
    with TestClient(app_for({"demo": Remembering})) as client:
        body = {"message": {"text": "hi"}, "data": {"page": "/orders/42", "n": [1, 2]}}
        frames = parse_sse(client.post("/agents/demo/runs", json=body).text)
        assert frames[-1]["text"] == "hi on /orders/42"
        too_big = {"message": {"text": "hi"}, "data": {"x": "y" * 17_000}}
        refused = client.post("/agents/demo/runs", json=too_big)
        assert refused.status_code == 413 and refused.json()["error"]["code"] == "data_too_large"
        not_object = client.post("/agents/demo/runs", json={"message": {"text": "hi"}, "data": [1]})
        assert not_object.status_code == 400
        with client.websocket_connect("/agents/demo/ws") as socket:
            command = {"type": "send", "message": {"text": "ws"}, "data": {"page": "/ws"}}
            socket.send_json(command)
            while (frame := socket.receive_json())["type"] != "done":
                pass
        assert frame["text"] == "ws on /ws"
    assert Remembering.seen == [{"page": "/orders/42", "n": [1, 2]}, {"page": "/ws"}]


def by_token(connection: HTTPConnection) -> str | None:
    """A bearer-token app: the token names the user."""
    auth = connection.headers.get("authorization", "")
    return auth.removeprefix("Bearer user-") if auth.startswith("Bearer user-") else None


def test_a_header_authenticated_app_opens_websockets_with_tickets() -> None:
    app = app_for({"demo": Remembering}, identify=by_token)
    with TestClient(app) as client:
        assert client.post("/agents/demo/tickets").status_code == 401
        issued = client.post("/agents/demo/tickets", headers={"authorization": "Bearer user-ada"})
        ticket = issued.json()["ticket"]
        assert issued.json()["expiresIn"] == 60
        with client.websocket_connect(f"/agents/demo/ws?ticket={ticket}") as socket:
            socket.send_json({"type": "send", "message": {"text": "hi"}})
            start = socket.receive_json()
        # The conversation is ada's: her token reads it, another user's does not.
        url = f"/agents/demo/contexts/{start['contextId']}"
        assert client.get(url, headers={"authorization": "Bearer user-ada"}).status_code == 200
        assert client.get(url, headers={"authorization": "Bearer user-bob"}).status_code == 404
        for bad in (ticket, ticket[:-2] + "xx", "nonsense"):  # used, forged, garbage
            with (
                pytest.raises(WebSocketDisconnect) as closed,
                client.websocket_connect(f"/agents/demo/ws?ticket={bad}") as socket,
            ):
                socket.receive_json()
                socket.receive_json()
            assert closed.value.code == 4401
        other_agent = app.state.thinwire.tickets.issue("ada", "another-agent").ticket
        with (
            pytest.raises(WebSocketDisconnect),
            client.websocket_connect(f"/agents/demo/ws?ticket={other_agent}") as socket,
        ):
            socket.receive_json()
            socket.receive_json()


def test_a_ticket_expires() -> None:
    from thinwire.tickets import Tickets

    tickets = Tickets(b"k" * 32, ttl=0.01)
    ticket = tickets.issue("ada", "demo").ticket
    asyncio.run(asyncio.sleep(0.05))
    assert tickets.redeem(ticket, "demo") is None
    fresh = Tickets(b"k" * 32).issue("ada", "demo").ticket
    assert Tickets(b"other key" * 4).redeem(fresh, "demo") is None  # another deployment's
    assert Tickets(b"k" * 32).redeem(fresh, "demo") == "ada"  # a replica sharing the secret


def test_a_page_not_built_yet_says_so_and_the_api_still_answers(tmp_path: Path) -> None:
    app = app_for({"demo": Remembering}, web_dir=tmp_path / "not-built")
    with TestClient(app) as client:
        page = client.get("/", headers={"accept": "text/html"})
        assert page.status_code == 503 and "not built" in page.text
        assert client.get("/nope").json()["error"]["code"] == "not_found"
        assert client.get("/healthz").json() == {"ok": True}
