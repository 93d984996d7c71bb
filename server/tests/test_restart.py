"""Memory survives the process: SIGKILL a real server and start it again."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from conftest import parse_sse, said
from test_uvicorn import events
from thinwire.testing import ServerProcess, serve

HERE = Path(__file__).resolve().parent
TOKEN = "restart-operator-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def durable(tmp_path: Path) -> Iterator[Any]:
    env = {
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "THINWIRE_DATA_DIR": str(tmp_path / "data"),
        "THINWIRE_OPERATOR_TOKEN": TOKEN,
    }

    def start() -> AbstractContextManager[ServerProcess]:
        args = ("serve", "--factory", "apps:durable", "--shutdown-timeout", "0.5")
        return serve(*args, env=env, log_dir=tmp_path)

    yield start


def run(
    client: httpx.Client, agent: str, text: str, context_id: str | None = None
) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"message": {"text": text}}
    if context_id:
        body["contextId"] = context_id
    response = client.post(f"/agents/{agent}/runs", json=body)
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def snapshot(client: httpx.Client, context_id: str) -> tuple[Any, Any, Any]:
    base = f"/agents/demo/contexts/{context_id}"
    transcript = client.get(base).json()
    state = client.get(f"/admin{base}/state", headers=AUTH).json()
    audit = client.get(f"/admin{base}/audit", headers=AUTH).json()
    return transcript, state, audit


def test_sigkill_loses_nothing_that_was_acknowledged(durable: Any) -> None:
    with durable() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        first = run(client, "demo", "my name is Ada")
        context_id = first[0]["contextId"]
        second = run(client, "demo", "and I like tea", context_id)
        patched = client.patch(
            f"/admin/agents/demo/contexts/{context_id}/state",
            json={"state": {"notes": ["likes tea"]}, "source": "anna"},
            headers=AUTH,
        )
        assert patched.status_code == 200
        before = snapshot(client, context_id)
        server.kill()

    with durable() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        after = snapshot(client, context_id)
        assert after == before
        transcript, state, audit = after
        assert len(transcript["turns"]) == 4
        assert state["state"]["notes"] == ["likes tea"] and state["state"]["messages_seen"] == 2
        assert ("notes", "operator:anna") in [(e["key"], e["source"]) for e in audit["entries"]]
        third = run(client, "demo", "who am I?", context_id)
    assert "Earlier you told me “my name is Ada”" in third[-1]["text"]
    assert third[0]["seq"] > second[-1]["seq"]


def test_a_run_killed_midway_is_recorded_as_interrupted(durable: Any) -> None:
    with durable() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        done = run(client, "demo", "a finished turn")  # a completed turn before the crash
        with client.stream(
            "POST", "/agents/gated/runs", json={"message": {"text": "hi"}}
        ) as response:
            stream = events(response)
            start, token = next(stream), next(stream)
        assert start is not None and token is not None
        context_id = start["contextId"]
        server.kill()

    with durable() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        transcript = client.get(f"/agents/gated/contexts/{context_id}").json()
        assert said(transcript["turns"]) == [
            {"role": "user", "text": "hi", "toolCalls": [], "stopReason": None},
            {"role": "assistant", "text": "", "toolCalls": [], "stopReason": "interrupted"},
        ]
        finished = client.get(f"/agents/demo/contexts/{done[0]['contextId']}").json()
        assert finished["turns"][1]["text"] == done[-1]["text"]  # other turns intact

        with client.stream(
            "POST",
            "/agents/gated/runs",
            json={"contextId": context_id, "message": {"text": "again"}},
        ) as response:
            stream = events(response)
            restart = next(stream)
            assert restart is not None and restart["seq"] > token["seq"]
            client.post("/test/release")
            assert [f for f in stream if f is not None][-1]["stopReason"] == "end"


def test_a_run_killed_midway_is_listed_as_interrupted_before_anyone_opens_it(
    durable: Any,
) -> None:
    with (
        durable() as server,
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("POST", "/agents/gated/runs", json={"message": {"text": "hi"}}) as response,
    ):
        stream = events(response)
        start, token = next(stream), next(stream)
        assert start is not None and token is not None
        [entry] = client.get("/agents/gated/contexts").json()["conversations"]
        assert entry["status"] == "running"  # it streams
        server.kill()

    with durable() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        [entry] = client.get("/agents/gated/contexts").json()["conversations"]
        assert (entry["contextId"], entry["status"]) == (start["contextId"], "idle")
        transcript = client.get(f"/agents/gated/contexts/{start['contextId']}").json()
        assert transcript["activeRunId"] is None
        assert transcript["turns"][-1]["stopReason"] == "interrupted"


def test_sigterm_mid_run_records_it_and_reattach_after_restart_loses_nothing(
    durable: Any,
) -> None:
    with (
        durable() as server,
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("POST", "/agents/gated/runs", json={"message": {"text": "hi"}}) as response,
    ):
        stream = events(response)
        seen = [next(stream), next(stream)]
        assert server.stop() in (0, -15)  # SIGTERM while the run waits at its gate
    assert "Application shutdown complete" in server.log()
    start, token = seen
    assert start is not None and token is not None

    with durable() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        base = f"/agents/gated/contexts/{start['contextId']}"
        rest = parse_sse(
            client.get(f"{base}/events", headers={"Last-Event-ID": str(token["seq"])}).text
        )
        assert [f["type"] for f in rest] == ["done"]
        assert rest[0]["stopReason"] == "interrupted" and rest[0]["text"] == "before the gate. "
        assert rest[0]["seq"] == token["seq"] + 1  # nothing the client had was lost or repeated
        turns = client.get(base).json()["turns"]
        assert turns[-1]["text"] == "before the gate. " and turns[-1]["stopReason"] == "interrupted"


def test_reattach_after_sigkill_ends_the_killed_run(durable: Any) -> None:
    with (
        durable() as server,
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("POST", "/agents/gated/runs", json={"message": {"text": "hi"}}) as response,
    ):
        stream = events(response)
        seen = [next(stream), next(stream)]
        server.kill()
    start, token = seen
    assert start is not None and token is not None
    with durable() as server, httpx.Client(base_url=server.url, timeout=10) as client:
        base = f"/agents/gated/contexts/{start['contextId']}/events"
        rest = parse_sse(client.get(base, headers={"Last-Event-ID": str(token["seq"])}).text)
        assert [(f["type"], f["stopReason"]) for f in rest] == [("done", "interrupted")]
        assert rest[0]["seq"] > token["seq"]
        # Whatever was flushed before the kill replays unchanged, in order, once.
        replay = parse_sse(client.get(base).text)
        seqs = [f["seq"] for f in replay]
        assert seqs == sorted(set(seqs)) and replay[-1] == rest[0]
        assert all(f in seen for f in replay[:-1])
