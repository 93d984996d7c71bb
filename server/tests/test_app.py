"""create_app refuses a misconfiguration with a sentence: when the app is made (a wrong
argument) or when it starts (a store that does not answer, an agent that cannot be made)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from conftest import app_for
from thinwire import Agent, Run, SQLiteStore, anonymous, create_app
from thinwire.demo import DemoAgent, create_demo_app
from thinwire.errors import Misconfigured


class Echo(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say(text)


@pytest.mark.parametrize(
    ("agents", "options", "error", "says"),
    [
        ({"demo": Echo()}, {}, TypeError, "pass the class Echo"),
        ({}, {}, TypeError, "mapping of names"),
        ({"my agent": Echo}, {}, ValueError, "agent names"),
        ({"demo": "Echo"}, {}, TypeError, "Agent class or a function"),
        ({"demo": Echo}, {"identify": "anonymous"}, TypeError, "identify must be a function"),
        ({"demo": Echo}, {"identify": lambda: "ada"}, TypeError, "cannot be called with one"),
        ({"demo": Echo}, {"identify": lambda a, b: "ada"}, TypeError, "cannot be called with one"),
        ({"demo": Echo}, {"store": "sqlite:///x.db"}, TypeError, "thinwire Store"),
        ({"demo": Echo}, {"allowed_origins": "http://a.example"}, TypeError, "a list"),
        ({"demo": Echo}, {"allowed_origins": ["a.example"]}, ValueError, "scheme://host"),
        ({"demo": Echo}, {"cors": True}, ValueError, "needs allowed_origins"),
        ({"demo": Echo}, {"allowed_hosts": "a.example"}, TypeError, "a list"),
        ({"demo": Echo}, {"allowed_hosts": ["http://a.example"]}, ValueError, "a name"),
    ],
)
def test_a_wrong_argument_is_refused_when_the_app_is_made(
    agents: Any, options: dict[str, Any], error: type[Exception], says: str
) -> None:
    options.setdefault("identify", anonymous)
    with pytest.raises(error, match=says):
        create_app(agents, **options)


def test_an_app_on_sqlite_starts_again_in_the_same_process(tmp_path: Path) -> None:
    """A test suite runs one module-level app's lifespan once per test."""
    app = create_app({"demo": DemoAgent}, identify=anonymous, store=SQLiteStore(tmp_path / "db"))
    with TestClient(app) as client:
        first = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
        context_id = first.text.split('"contextId":"')[1].split('"')[0]
    with TestClient(app) as client:  # the store closed, and opens again
        again = client.get(f"/agents/demo/contexts/{context_id}")
        assert again.status_code == 200 and again.json()["turns"][0]["text"] == "hi"


def test_startup_logs_which_replica_this_is(caplog: pytest.LogCaptureFixture) -> None:
    """A lease in the store names its replica: the log lets an operator find the process."""
    app = app_for({"demo": DemoAgent, "other": DemoAgent})
    with caplog.at_level("INFO", logger="thinwire"), TestClient(app):
        replica = app.state.thinwire.coordinator.replica_id
    assert f"serving demo, other as {replica}" in caplog.messages


def test_an_agent_that_cannot_be_made_stops_the_app_from_starting() -> None:
    class Broken(Agent):
        def __init__(self) -> None:
            raise KeyError("OPENAI_API_KEY")

    with (
        pytest.raises(Misconfigured, match="'demo' cannot be created: KeyError"),
        TestClient(app_for({"demo": Broken})),
    ):
        pass


def test_a_store_that_does_not_answer_stops_the_app_from_starting(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("a file where a directory should be")
    store = SQLiteStore(tmp_path / "not-a-dir" / "thinwire.sqlite3")
    with (
        pytest.raises(Misconfigured, match="the store does not answer"),
        TestClient(app_for({"demo": DemoAgent}, store=store)),
    ):
        pass


def test_cors_answers_preflights_and_lets_the_listed_page_read() -> None:
    app = app_for({"demo": Echo}, allowed_origins=["http://localhost:5173"], cors=True)
    with TestClient(app) as client:
        preflight = client.options(
            "/agents/demo/runs",
            headers={
                "origin": "http://localhost:5173",
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, thinwire-protocol, authorization",
            },
        )
        assert preflight.status_code == 200 and preflight.headers["thinwire-protocol"] == "1"
        assert preflight.headers["access-control-allow-origin"] == "http://localhost:5173"
        assert preflight.headers["access-control-allow-credentials"] == "true"
        response = client.post(
            "/agents/demo/runs",
            json={"message": {"text": "hi"}},
            headers={"origin": "http://localhost:5173"},
        )
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "http://localhost:5173"
        assert "thinwire-protocol" in response.headers["access-control-expose-headers"].lower()
        other = client.options(
            "/agents/demo/runs",
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
        assert "access-control-allow-origin" not in other.headers
        # Refused as any request is: typed JSON, with its code.
        assert other.status_code == 403 and other.headers["thinwire-protocol"] == "1"
        for answer in (preflight, other):  # as every response: CORS answers them first
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert other.json()["error"]["code"] == "origin_not_allowed"
        odd = client.options(
            "/agents/demo/runs",
            headers={"origin": "http://localhost:5173", "access-control-request-method": "PUT"},
        )
        assert odd.status_code == 400 and odd.json()["error"]["code"] == "invalid_request"
        assert "method" in odd.json()["error"]["message"]
        refused = client.post(
            "/agents/demo/runs",
            json={"message": {"text": "hi"}},
            headers={"origin": "https://evil.example"},
        )
        assert refused.status_code == 403
        assert "allowed_origins does not list its origin" in refused.json()["error"]["message"]


REBINDING = "rebind.attacker.example:8000"


def test_an_anonymous_app_answers_only_to_names_no_other_site_can_point_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: a page at an attacker's name, pointed at this server's address,
    is same-origin with it by Host; an app that needs no credentials checks the Host."""
    with TestClient(app_for({"demo": Echo})) as client:
        refused = client.get("/agents/demo/contexts", headers={"host": REBINDING})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "host_not_allowed"
        assert refused.headers["x-content-type-options"] == "nosniff"  # as every answer
        sent = client.post(
            "/agents/demo/runs",
            json={"message": {"text": "hi"}},
            headers={"host": REBINDING, "origin": f"http://{REBINDING}"},
        )
        assert sent.status_code == 400
        with (
            pytest.raises(WebSocketDisconnect) as closed,
            client.websocket_connect("/agents/demo/ws", headers={"host": REBINDING}),
        ):
            pass
        assert closed.value.code == 4403
        for host in ("127.0.0.1:8000", "localhost:5173", "[::1]:8000", "my-laptop", "a.localhost"):
            assert client.get("/agents/demo/contexts", headers={"host": host}).status_code == 200
    listed = app_for(
        {"demo": Echo},
        allowed_hosts=["agents.example.com", "*.example.org"],
        allowed_origins=["https://app.example.net:8443"],  # its host, too
    )
    with TestClient(listed) as client:
        for host in ("agents.example.com", "chat.example.org:443", "127.0.0.1", "app.example.net"):
            assert client.get("/agents/demo/contexts", headers={"host": host}).status_code == 200
        assert client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 400
    for app in (
        app_for({"demo": Echo}, allowed_hosts=["*"]),
        app_for({"demo": Echo}, identify=lambda c: "ada"),  # credentials: a rebinding page has none
    ):
        with TestClient(app) as client:
            assert (
                client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 200
            )
    # The demo's guest needs no credentials either; it answers to the names it is told.
    with TestClient(create_demo_app(data_dir=tmp_path)) as client:
        assert client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 400
        assert client.get("/agents/demo/contexts").status_code == 200
    monkeypatch.setenv("THINWIRE_ALLOWED_HOSTS", "demo.example.com,other.example.org")
    with TestClient(create_demo_app(data_dir=tmp_path)) as client:
        for host, status in (("demo.example.com", 200), ("other.example.org:8000", 200)):
            assert client.get("/agents/demo/contexts", headers={"host": host}).status_code == status
        assert client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 400


def test_sqlite_errors_at_startup_name_the_cause(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")

    def unreadable(work: Any) -> Any:
        raise sqlite3.OperationalError("unable to open database file")

    store._database._read = unreadable  # type: ignore[method-assign]
    with (
        pytest.raises(Misconfigured, match="unable to open database file"),
        TestClient(app_for({"demo": DemoAgent}, store=store)),
    ):
        pass


def test_a_database_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    where = tmp_path / "a-directory-not-a-file"
    where.mkdir()
    with (
        pytest.raises(Misconfigured, match=f"cannot open {where}: unable to open database file"),
        TestClient(app_for({"demo": DemoAgent}, store=SQLiteStore(where))),
    ):
        pass
