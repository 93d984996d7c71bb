"""A send repeated with its messageId (a retry whose first try may have landed) starts no
second run: it streams the first one's, from its run_start."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import app_for, parse_sse
from thinwire.demo import DemoAgent

RUNS = "/agents/demo/runs"


def post(client: TestClient, body: dict[str, Any], status: int = 200) -> list[dict[str, Any]]:
    response = client.post(RUNS, json=body)
    assert response.status_code == status, response.text
    return parse_sse(response.text) if status == 200 else [response.json()]


@pytest.fixture
def client() -> TestClient:
    # A burst of 2 runs: a repeat that counted as a run would be refused.
    return TestClient(app_for({"demo": DemoAgent}, run_burst=2, runs_per_second=0.001))


def test_a_repeated_first_send_streams_the_run_it_created(client: TestClient) -> None:
    body = {"message": {"text": "hello"}, "messageId": "msg-0000-first"}
    first = post(client, body)
    again = post(client, body)
    assert again == first  # the same run, every frame, from its run_start
    context_id = first[0]["contextId"]
    turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
    assert [turn["role"] for turn in turns] == ["user", "assistant"]
    # Neither counted against the limit twice: one more run is still allowed.
    post(client, {"message": {"text": "next"}, "contextId": context_id})


def test_a_repeated_send_in_a_conversation_streams_its_run(client: TestClient) -> None:
    context_id = post(client, {"message": {"text": "one"}})[0]["contextId"]
    body = {"message": {"text": "two"}, "contextId": context_id, "messageId": "msg-0000-two"}
    first = post(client, body)
    assert post(client, body) == first
    turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
    assert [turn["text"] for turn in turns if turn["role"] == "user"] == ["one", "two"]


def test_another_principal_with_the_same_id_gets_a_conversation_of_their_own() -> None:
    app = app_for({"demo": DemoAgent}, identify=lambda c: c.headers.get("x-user"))
    with TestClient(app) as client:
        body = {"message": {"text": "hi"}, "messageId": "msg-0000-shared"}
        ada = client.post(RUNS, json=body, headers={"x-user": "ada"})
        bob = client.post(RUNS, json=body, headers={"x-user": "bob"})
    ada_context = parse_sse(ada.text)[0]["contextId"]
    assert parse_sse(bob.text)[0]["contextId"] != ada_context


def test_the_same_id_to_another_agent_is_refused_without_naming_the_conversation() -> None:
    with TestClient(app_for({"demo": DemoAgent, "other": DemoAgent})) as client:
        body = {"message": {"text": "hi"}, "messageId": "msg-0000-reused"}
        first = post(client, body)
        response = client.post("/agents/other/runs", json=body)
        assert response.status_code == 409
        error = response.json()["error"]
        assert error["code"] == "message_already_sent" and "another agent" in error["message"]
        assert first[0]["contextId"] not in response.text
        # Under a new id the message goes through.
        body["messageId"] = "msg-0000-fresh"
        assert client.post("/agents/other/runs", json=body).status_code == 200


def test_a_repeat_of_a_run_no_longer_kept_is_told_so(client: TestClient) -> None:
    client.app.state.thinwire.limiter = None  # type: ignore[attr-defined]
    body = {"message": {"text": "old"}, "messageId": "msg-0000-old0"}
    context_id = post(client, body)[0]["contextId"]
    for text in ("b", "c"):  # the frames of the latest two runs are kept
        post(client, {"message": {"text": text}, "contextId": context_id})
    refused = post(client, {**body, "contextId": context_id}, status=409)
    assert refused[0]["error"]["code"] == "message_already_sent"


def test_a_repeat_over_a_websocket_names_its_own_request(client: TestClient) -> None:
    with client.websocket_connect("/agents/demo/ws") as socket:
        command = {"type": "send", "message": {"text": "hi"}, "messageId": "msg-0000-wsws"}
        socket.send_json({**command, "requestId": "try-1"})
        first = until_done(socket)
        socket.send_json({**command, "requestId": "try-2"})
        again = until_done(socket)
    assert (first[0]["requestId"], again[0]["requestId"]) == ("try-1", "try-2")
    assert [f["seq"] for f in again] == [f["seq"] for f in first]
    assert again[-1] == first[-1]


def until_done(socket: Any) -> list[dict[str, Any]]:
    frames = [json.loads(socket.receive_text())]
    while frames[-1]["type"] != "done":
        frames.append(json.loads(socket.receive_text()))
    return frames


def test_a_repeat_while_the_run_goes_follows_it_live() -> None:
    from test_streams import Paced, open_gate

    Paced.gate = asyncio.Event()
    Paced.effects = []
    with (
        TestClient(app_for({"demo": Paced}, heartbeat_interval=None)) as client,
        client.websocket_connect("/agents/demo/ws") as socket,
    ):
        command = {"type": "send", "message": {"text": "go"}, "messageId": "msg-0000-live"}
        socket.send_json({**command, "requestId": "try-1"})
        start = json.loads(socket.receive_text())
        socket.send_json({**command, "requestId": "try-2"})
        seen: list[dict[str, Any]] = []
        while not any(f["type"] == "run_start" and f["requestId"] == "try-2" for f in seen):
            seen.append(json.loads(socket.receive_text()))
        retry_start = seen[-1]
        open_gate(client)
        while sum(f["type"] == "done" for f in seen) < 2:  # both streams end…
            seen.append(json.loads(socket.receive_text()))
    assert (retry_start["runId"], retry_start["seq"]) == (start["runId"], start["seq"])
    assert {f["runId"] for f in seen} == {start["runId"]}
    assert Paced.effects == ["go"]  # …of one run


def test_an_id_older_than_the_latest_hundred_is_a_new_message() -> None:
    """protocol.md: a conversation remembers the ids of its latest SENDS_KEPT messages."""
    from thinwire import Agent, Run
    from thinwire.records import SENDS_KEPT

    class Quick(Agent):
        async def run(self, run: Run, text: str) -> None:
            await run.say(text)

    with TestClient(app_for({"demo": Quick}, runs_per_second=0)) as client:
        first = {"message": {"text": "first"}, "messageId": "msg-0000-first"}
        started = post(client, first)[0]
        context_id = started["contextId"]
        for n in range(SENDS_KEPT):
            body = {"message": {"text": f"m{n}"}, "messageId": f"msg-{n:08d}"}
            post(client, {**body, "contextId": context_id})
        again = post(client, {**first, "contextId": context_id})
        assert again[-1]["text"] == "first" and again[0]["runId"] != started["runId"]
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
        assert len(turns) == 2 * (SENDS_KEPT + 2)  # the first message, answered twice
