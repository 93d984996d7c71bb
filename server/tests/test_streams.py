"""Streams that survive: reattach without gaps or duplicates, stop, two readers."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from starlette.testclient import TestClient

from conftest import app_for, parse_sse, said, server_context
from thinwire import Agent, Run


class Paced(Agent):
    """Says five words, waits at a gate, says five more; counts what happens after."""

    gate: ClassVar[asyncio.Event] = asyncio.Event()
    effects: ClassVar[list[str]] = []

    async def run(self, run: Run, text: str) -> None:
        for n in range(5):
            await run.say(f"a{n} ")
        await type(self).gate.wait()
        type(self).effects.append(text)  # a side effect after the gate
        for n in range(5):
            await run.say(f"b{n} ")


@pytest.fixture
def client() -> Iterator[TestClient]:
    Paced.gate = asyncio.Event()
    Paced.effects = []
    with TestClient(app_for({"demo": Paced}, heartbeat_interval=None)) as test_client:
        yield test_client


def open_gate(client: TestClient) -> None:
    assert client.portal is not None
    client.portal.call(Paced.gate.set)


def read_frames(lines: Iterator[str], count: int) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    block: list[str] = []
    while len(frames) < count:
        line = next(lines)
        if line:
            block.append(line)
        elif block:
            frames += parse_sse("\n".join(block))
            block = []
    return frames


def test_reattach_after_a_disconnect_sends_every_missing_frame_once(client: TestClient) -> None:
    with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "go"}}) as stream:
        seen = read_frames(stream.iter_lines(), 3)  # run_start, a0, a1 — then the tab dies
    context_id = seen[0]["contextId"]
    open_gate(client)
    response = client.get(
        f"/agents/demo/contexts/{context_id}/events",
        headers={"Last-Event-ID": str(seen[-1]["seq"])},
    )
    assert response.status_code == 200
    assert response.text.startswith("retry: 1000\n\n")
    rest = parse_sse(response.text)
    frames = seen + rest
    seqs = [f["seq"] for f in frames]
    assert seqs == list(range(seqs[0], seqs[0] + len(frames)))  # no gap, no duplicate
    done = frames[-1]
    assert done["type"] == "done" and done["stopReason"] == "end"
    assert "".join(f["delta"] for f in frames if f["type"] == "token") == done["text"]
    assert done["text"] == "a0 a1 a2 a3 a4 b0 b1 b2 b3 b4 "


def test_after_query_and_204_when_nothing_is_left(client: TestClient) -> None:
    open_gate(client)
    frames = parse_sse(client.post("/agents/demo/runs", json={"message": {"text": "go"}}).text)
    base = f"/agents/demo/contexts/{frames[0]['contextId']}/events"
    replay = parse_sse(client.get(f"{base}?after={frames[4]['seq']}").text)
    assert replay == frames[5:]
    assert parse_sse(client.get(base).text) == frames  # from the start of the latest run
    nothing = client.get(base, headers={"Last-Event-ID": str(frames[-1]["seq"])})
    assert nothing.status_code == 204 and nothing.text == ""
    bad = client.get(base, headers={"Last-Event-ID": "-1"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"


def test_a_cursor_past_all_a_live_run_sent_gets_nothing(client: TestClient) -> None:
    # Not the frames to come, numbered below it: a client filtering by seq would drop
    # every one, `done` too, and wait forever (a cursor of another conversation, say).
    with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "go"}}) as stream:
        lines = stream.iter_lines()
        seen = read_frames(lines, 6)  # run_start, a0…a4; the run waits
        base = f"/agents/demo/contexts/{seen[0]['contextId']}/events"
        ahead = client.get(base, params={"after": seen[-1]["seq"] + 1})
        assert ahead.status_code == 204
        with client.websocket_connect("/agents/demo/ws") as socket:
            attach = {"type": "attach", "contextId": seen[0]["contextId"], "after": 10**6}
            socket.send_json(attach)
            assert socket.receive_json()["code"] == "no_run"
        open_gate(client)
        rest = read_frames(lines, 6)
    assert rest[-1]["type"] == "done"


def test_reattach_replays_only_the_latest_run(client: TestClient) -> None:
    open_gate(client)
    first = parse_sse(client.post("/agents/demo/runs", json={"message": {"text": "one"}}).text)
    context_id = first[0]["contextId"]
    second = parse_sse(
        client.post(
            "/agents/demo/runs", json={"contextId": context_id, "message": {"text": "two"}}
        ).text
    )
    replay = parse_sse(client.get(f"/agents/demo/contexts/{context_id}/events?after=0").text)
    assert replay == second
    assert {f["runId"] for f in replay} == {second[0]["runId"]}


def test_a_second_reader_follows_the_live_run(client: TestClient) -> None:
    with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "go"}}) as first:
        first_lines = first.iter_lines()
        start = read_frames(first_lines, 1)[0]
        url = f"/agents/demo/contexts/{start['contextId']}/events"
        transcript = client.get(f"/agents/demo/contexts/{start['contextId']}").json()
        assert transcript["activeRunId"] == start["runId"]
        with client.stream("GET", url) as second:
            second_lines = second.iter_lines()
            watched = read_frames(second_lines, 6)  # caught up with the run so far...
            open_gate(client)
            watched += parse_sse("\n".join(second_lines))  # ...and followed it live
        owned = [start, *parse_sse("\n".join(first_lines))]
    assert watched == owned and owned[-1]["type"] == "done"


def test_stop_cancels_the_work_and_keeps_the_partial_reply(client: TestClient) -> None:
    with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "go"}}) as stream:
        lines = stream.iter_lines()
        start = read_frames(lines, 6)[0]  # run_start and the five words before the gate
        context_id = start["contextId"]
        stopped = client.post(f"/agents/demo/contexts/{context_id}/stop")
        assert stopped.json() == {
            "contextId": context_id,
            "runId": start["runId"],
            "stopping": True,
        }
        rest = parse_sse("\n".join(lines))
    done = rest[-1]
    assert done["type"] == "done" and done["stopReason"] == "stopped"
    assert done["text"] == "a0 a1 a2 a3 a4 "
    open_gate(client)  # had the work gone on, the side effect would happen now
    assert client.portal is not None
    client.portal.call(asyncio.sleep, 0.05)
    assert Paced.effects == []
    turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
    assert said(turns)[-1] == {
        "role": "assistant",
        "text": "a0 a1 a2 a3 a4 ",
        "toolCalls": [],
        "stopReason": "stopped",
    }
    again = client.post(f"/agents/demo/contexts/{context_id}/stop").json()
    assert again["stopping"] is False  # nothing left to stop
    assert server_context(client, context_id).log is None
