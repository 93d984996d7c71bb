from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from thinwire import MemoryStore, SQLiteStore, anonymous, create_app
from thinwire.app import AgentFactory
from thinwire.contexts import Context
from thinwire.demo import CANARIES, create_demo_app
from thinwire.testing import redis_server_binary, serve_redis


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Frames of an SSE body, each with the SSE `id` under the key `_id`."""
    frames = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if "data" in fields:
            frame = json.loads(fields["data"])
            frame["_id"] = fields.get("id")
            frames.append(frame)
    return frames


def app_for(agents: dict[str, AgentFactory], **options: Any) -> Any:
    """An app over an in-memory store, in explicit anonymous mode unless told otherwise."""
    options.setdefault("identify", anonymous)
    options.setdefault("store", MemoryStore())
    return create_app(agents, **options)


def server_context(client: TestClient, context_id: str, agent: str = "demo") -> Context:
    """The server's own view of a context, for asserting what stays on the server."""
    registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
    assert client.portal is not None
    context: Context = client.portal.call(registry.get_for_operator, agent, context_id)
    return context


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A real redis-server for the session; each test keeps to a key prefix of its own."""
    if redis_server_binary() is None:
        pytest.skip("no redis-server here (make test installs Debian's package)")
    with serve_redis() as url:
        yield url


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_demo_app(delay=0, store=MemoryStore(), data_dir=tmp_path)
    with TestClient(app) as test_client:
        yield test_client


def send(
    client: TestClient, text: str, context_id: str | None = None, *, agent: str = "demo"
) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"message": {"text": text}}
    if context_id is not None:
        body["contextId"] = context_id
    response = client.post(f"/agents/{agent}/runs", json=body)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.text)


def decide(
    client: TestClient, frames: list[dict[str, Any]], value: Any, *, agent: str = "demo"
) -> list[dict[str, Any]]:
    """Answer the interrupt a run ended on (its last, before `done`); the resumed run's
    frames."""
    asked = next(f["interrupt"] for f in reversed(frames) if f["type"] == "interrupt")
    response = client.post(
        f"/agents/{agent}/contexts/{frames[0]['contextId']}/decisions",
        json={"interruptId": asked["interruptId"], "value": value},
    )
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def stop_over_websocket(
    client: TestClient,
    text: str,
    *,
    at: str,
    agent: str = "demo",
    once: threading.Event | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Send `text` over a WebSocket and stop its run at its first frame of type `at` (and
    once `once` is set, if given: a tool's frame comes before the tool starts); the run's
    `run_start` and its `done`."""
    with client.websocket_connect(f"/agents/{agent}/ws") as socket:
        socket.send_json({"type": "send", "message": {"text": text}})
        start: dict[str, Any] = socket.receive_json()
        while socket.receive_json()["type"] != at:
            pass
        assert once is None or once.wait(10)
        socket.send_json({"type": "stop", "contextId": start["contextId"]})
        while (done := socket.receive_json())["type"] != "done":
            pass
    return start, done


def tool_frames(frames: list[dict[str, Any]]) -> list[tuple[str, str, bool | None]]:
    """The tool frames of a run: type, name and whether it succeeded."""
    return [(f["type"], f["name"], f.get("ok")) for f in frames if f["type"].startswith("tool_")]


def said(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What each turn said: its role, text, tools and stop reason (not its id, the times
    in its meta, or what else it showed)."""
    keys = ("role", "text", "toolCalls", "stopReason")
    return [{key: turn[key] for key in keys} for turn in turns]


def assert_no_canary(text: str) -> None:
    for where, canary in CANARIES.items():
        assert canary not in text, f"the {where} canary leaked"


class FullDisk:
    """A SQLite store's disk, filled and freed on demand, as a tmpfs filled with `dd` is
    but without a mount: while it is full every commit fails as SQLite's does on a full
    disk, and reads go on working."""

    def __init__(self, store: SQLiteStore) -> None:
        self.full = False
        #: Commits refused so far.
        self.refused = 0
        database = store._database
        commit = database._commit

        def committing(works: list[Any], fsync: bool) -> list[Any]:
            if self.full:
                self.refused += 1
                raise sqlite3.OperationalError("database or disk is full")
            return commit(works, fsync)

        database._commit = committing  # type: ignore[method-assign]
