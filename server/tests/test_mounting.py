"""A thinwire app inside another app: mounted with its lifespan, its page and its
OpenAPI document under the prefix; tickets for header-authenticated WebSockets; the page's
data reaching the agent."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
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
        # …for a browser only (docs/server.md): curl's, or a name with a dot, is a 404.
        assert client.get("/api/settings/profile").status_code == 404
        dotted = client.get("/api/settings/profile.json", headers={"accept": "text/html"})
        assert dotted.status_code == 404
        assert client.get("/api/missing.js").status_code == 404  # a missing file is not
        assert client.get("/api/agents/demo/runs").status_code == 405  # nor the API
        for path in ("/api/agents", "/api/admin", "/api/.env"):  # nor its roots, nor dotfiles
            assert client.get(path, headers={"accept": "text/html"}).status_code == 404, path
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
        assert client.portal is not None
        tickets = app.state.thinwire.tickets
        other_agent = client.portal.call(tickets.issue, "ada", "another-agent").ticket
        with (
            pytest.raises(WebSocketDisconnect),
            client.websocket_connect(f"/agents/demo/ws?ticket={other_agent}") as socket,
        ):
            socket.receive_json()
            socket.receive_json()


def test_a_ticket_expires() -> None:
    from thinwire.coordination import LocalCoordinator
    from thinwire.tickets import Tickets

    async def check() -> None:
        coordinator = LocalCoordinator()
        tickets = Tickets(coordinator, ttl=0.01)
        ticket = (await tickets.issue("ada", "demo")).ticket
        await asyncio.sleep(0.05)
        assert await tickets.redeem(ticket, "demo") is None
        fresh = (await Tickets(coordinator).issue("ada", "demo")).ticket
        assert await Tickets(LocalCoordinator()).redeem(fresh, "demo") is None  # another's
        for odd in ("x.\u00e9", "\u00e9.x", "x.\ud800"):  # whatever the query string held
            assert await tickets.redeem(odd, "demo") is None
        replica = Tickets(coordinator.replica())  # a replica sharing the secret
        assert await replica.redeem(fresh, "demo") == "ada"
        assert await Tickets(coordinator).redeem(fresh, "demo") is None  # and its uses

    asyncio.run(check())


def test_a_forged_ticket_rereads_the_secret_once_a_second_at_most() -> None:
    from thinwire.coordination import LocalCoordinator
    from thinwire.tickets import Tickets

    class Counting(LocalCoordinator):
        reads = 0

        async def secret(self) -> bytes:
            self.reads += 1
            return await super().secret()

    async def check() -> None:
        coordinator = Counting()
        tickets = Tickets(coordinator)
        genuine = (await tickets.issue("ada", "demo")).ticket
        assert coordinator.reads == 1
        for forged in ("x.y", genuine[:-2] + "xx", "x.z"):
            assert await tickets.redeem(forged, "demo") is None
        assert coordinator.reads == 2  # the first forgery reread it; the others did not
        assert await tickets.redeem(genuine, "demo") == "ada"
        assert coordinator.reads == 2

    asyncio.run(check())


def test_a_store_that_cannot_say_whether_a_ticket_was_used_refuses_the_handshake() -> None:
    from thinwire.coordination import LocalCoordinator
    from thinwire.errors import StoreError

    class Away(LocalCoordinator):
        async def use_once(self, key: str, ttl: float, secret: bytes) -> bool:
            raise StoreError("the store is unavailable; try again shortly")

    app = app_for({"demo": Remembering}, identify=by_token, coordinator=Away())
    with TestClient(app) as client:
        issued = client.post("/agents/demo/tickets", headers={"authorization": "Bearer user-ada"})
        url = f"/agents/demo/ws?ticket={issued.json()['ticket']}"
        with (
            pytest.raises(WebSocketDisconnect) as closed,
            client.websocket_connect(url) as socket,
        ):
            socket.send_json({"type": "send", "message": {"text": "hi"}})
            assert socket.receive_json().get("code") == "store_unavailable"
            socket.receive_json()
        assert closed.value.code == 1011


def open_with(client: TestClient, ticket: str) -> str:
    """What a socket opened with `ticket` gets: its first frame's type, or its close code."""
    try:
        with client.websocket_connect(f"/agents/demo/ws?ticket={ticket}") as socket:
            socket.send_json({"type": "send", "message": {"text": "hi"}})
            first = socket.receive_json()
            return str(first["type"] if first["type"] != "rejected" else first["code"])
    except WebSocketDisconnect as closed:
        return str(closed.code)


ADA = {"authorization": "Bearer user-ada"}


def redis_replica(url: str, prefix: str) -> Any:
    from thinwire.stores.redis import RedisStore

    store = RedisStore.from_url(url, prefix=prefix)
    return app_for({"demo": Remembering}, identify=by_token, store=store)


def test_a_ticket_opens_one_socket_across_replicas(redis_url: str) -> None:
    prefix = f"tickets-{secrets.token_hex(4)}"
    with (
        TestClient(redis_replica(redis_url, prefix)) as a,
        TestClient(redis_replica(redis_url, prefix)) as b,
    ):
        ticket = a.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
        assert open_with(b, ticket) == "run_start"
        assert open_with(a, ticket) == "unauthenticated"
        assert open_with(b, ticket) == "unauthenticated"
        ticket = b.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
        assert open_with(a, ticket) == "run_start"
        assert open_with(b, ticket) == "unauthenticated"


def test_tickets_work_between_old_and_new_replicas_once_redis_lost_its_data(
    redis_url: str,
) -> None:
    import redis

    url = redis_url.rsplit("/", 1)[0] + "/9"  # a database of its own, to flush
    prefix = f"tickets-{secrets.token_hex(4)}"
    with (
        TestClient(redis_replica(url, prefix)) as a,
        TestClient(redis_replica(url, prefix)) as b,
    ):
        used = a.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
        assert open_with(b, used) == "run_start"
        unused = b.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
        redis.Redis.from_url(url).flushdb()  # a restart without persistence
        # The uses went with the data: a ticket of before opens no socket again, not even
        # on a replica that has yet to learn the secret changed.
        assert open_with(b, used) == "unauthenticated"
        assert open_with(b, unused) == "unauthenticated"
        with TestClient(redis_replica(url, prefix)) as c:
            from_a = a.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
            assert open_with(c, from_a) == "run_start"  # a signs with the secret of now
            from_c = c.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
            assert open_with(b, from_c) == "run_start"  # b, with the old one, rereads it
            from_b = b.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
            assert open_with(a, from_b) == "run_start"
            assert open_with(a, used) == "unauthenticated"
            assert open_with(c, used) == "unauthenticated"
            assert open_with(c, unused) == "unauthenticated"


def forged(secret: bytes, principal: str) -> str:
    """A ticket for anyone, signed by whoever holds the key (a copy of Redis's data)."""
    from thinwire.tickets import TICKET_TTL, sign

    claims = json.dumps([principal, "demo", time.time() + TICKET_TTL]).encode()
    payload = base64.urlsafe_b64encode(claims).decode().rstrip("=")
    return f"{payload}.{sign(secret, payload)}"


def test_rotating_the_ticket_key_refuses_what_the_old_one_signs_on_running_replicas(
    redis_url: str,
) -> None:
    """deploy.md's rotation after a backup leaked: one DEL, no restart."""
    import redis

    prefix = f"tickets-{secrets.token_hex(4)}"
    control = redis.Redis.from_url(redis_url)
    with (
        TestClient(redis_replica(redis_url, prefix)) as a,
        TestClient(redis_replica(redis_url, prefix)) as b,
    ):
        ticket = a.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
        assert open_with(b, ticket) == "run_start"  # b holds the key in hand too
        leaked = control.get(f"{prefix}:secret:tickets")
        assert leaked is not None
        old = bytes.fromhex(leaked.decode())
        assert open_with(b, forged(old, "mallory")) == "run_start"  # what a copy of it does
        assert control.delete(f"{prefix}:secret:tickets") == 1  # the rotation
        for replica in (b, a):
            assert open_with(replica, forged(old, "mallory")) == "unauthenticated"
        ticket = a.post("/agents/demo/tickets", headers=ADA).json()["ticket"]
        assert open_with(b, ticket) == "run_start"  # signed with the new key, and taken
        assert control.get(f"{prefix}:secret:tickets") not in (None, leaked)
    control.close()


@pytest.mark.parametrize("directory_made", [False, True])
def test_a_page_not_built_yet_says_so_and_the_api_still_answers(
    tmp_path: Path, directory_made: bool
) -> None:
    """No directory yet, or one without its index.html: `/` and a browser's client-side
    route answer 503 with the notice docs/server.md quotes."""
    web = tmp_path / "not-built"
    if directory_made:  # …with the build's assets but no index.html
        web.mkdir()
        (web / "app.js").write_text("")
    app = app_for({"demo": Remembering}, web_dir=web)
    with TestClient(app) as client:
        for path, headers in [("/", {}), ("/orders/42", {"accept": "text/html"})]:
            page = client.get(path, headers=headers)
            assert page.status_code == 503 and "The page is not built" in page.text
        assert client.get("/nope").json()["error"]["code"] == "not_found"
        assert client.get("/healthz").json() == {"ok": True}
