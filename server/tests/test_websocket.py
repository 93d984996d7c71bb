"""The WebSocket transport: the same frames and commands as HTTP, and hostile input."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient, WebSocketDenialResponse
from starlette.websockets import WebSocketDisconnect

from conftest import app_for
from test_streams import Paced, open_gate
from thinwire import Agent, Run, websocket
from thinwire.demo import DemoAgent
from thinwire.websocket import HEARTBEAT_SECONDS, socket_heartbeat

URL = "/agents/demo/ws"
PROTOCOL = ["thinwire.v1"]


def by_header(connection: Any) -> str:
    return str(connection.headers.get("x-user", "anon"))


@pytest.fixture
def client() -> Iterator[TestClient]:
    import asyncio

    Paced.gate = asyncio.Event()
    Paced.effects = []
    app = app_for(
        {"demo": Paced, "talker": DemoAgent},
        heartbeat_interval=None,
        run_burst=10,
        identify=by_header,
    )
    with TestClient(app) as test_client:
        yield test_client


def receive(socket: Any, count: int) -> list[dict[str, Any]]:
    return [json.loads(socket.receive_text()) for _ in range(count)]


def until_done(socket: Any) -> list[dict[str, Any]]:
    frames = []
    while not frames or frames[-1]["type"] != "done":
        frames.append(json.loads(socket.receive_text()))
    return frames


def test_send_streams_the_same_frames_as_sse(client: TestClient) -> None:
    open_gate(client)
    with client.websocket_connect("/agents/talker/ws", subprotocols=PROTOCOL) as socket:
        assert socket.accepted_subprotocol == "thinwire.v1"
        socket.send_json({"type": "send", "message": {"text": "hello there"}})
        frames = until_done(socket)
        context_id = frames[0]["contextId"]
        socket.send_json({"type": "send", "contextId": context_id, "message": {"text": "again"}})
        second = until_done(socket)
    assert frames[0]["type"] == "run_start"
    assert [f["seq"] for f in frames + second] == list(range(1, len(frames) + len(second) + 1))
    assert "Earlier you told me “hello there”" in second[-1]["text"]
    sse = client.get(f"/agents/talker/contexts/{context_id}/events?after=0").text
    assert [
        json.loads(line[6:]) for line in sse.splitlines() if line.startswith("data: ")
    ] == second


def test_reattach_on_a_new_socket_without_gap_or_duplicate(client: TestClient) -> None:
    with client.websocket_connect(URL, subprotocols=PROTOCOL) as socket:
        socket.send_json({"type": "send", "message": {"text": "go"}})
        seen = receive(socket, 3)
    context_id = seen[0]["contextId"]
    open_gate(client)
    with client.websocket_connect(URL, subprotocols=PROTOCOL) as socket:
        socket.send_json({"type": "attach", "contextId": context_id, "after": seen[-1]["seq"]})
        rest = until_done(socket)
    frames = seen + rest
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert frames[-1]["text"] == "a0 a1 a2 a3 a4 b0 b1 b2 b3 b4 "


def test_a_commands_request_id_comes_back_with_the_run_it_started(client: TestClient) -> None:
    open_gate(client)
    with client.websocket_connect(URL, subprotocols=PROTOCOL) as socket:
        for request_id in ("req-a", "req-b"):  # two new conversations in flight at once
            socket.send_json(
                {"type": "send", "message": {"text": request_id}, "requestId": request_id}
            )
        frames: list[dict[str, Any]] = []
        while sum(f["type"] == "done" for f in frames) < 2:
            frames.append(json.loads(socket.receive_text()))
        starts = {f["requestId"]: f for f in frames if f["type"] == "run_start"}
        assert set(starts) == {"req-a", "req-b"}
        assert starts["req-a"]["contextId"] != starts["req-b"]["contextId"]
        socket.send_json({"type": "attach", "contextId": "ctx-" + "0" * 36, "requestId": "r:3"})
        while (refused := json.loads(socket.receive_text()))["type"] != "rejected":
            pass
        assert (refused["code"], refused["requestId"]) == ("context_not_found", "r:3")
        socket.send_json({"type": "stop", "contextId": "x", "requestId": "bad id!"})
        assert json.loads(socket.receive_text())["code"] == "invalid_request"


def test_stop_and_typed_rejections(client: TestClient) -> None:
    with client.websocket_connect(URL, subprotocols=PROTOCOL) as socket:
        socket.send_json({"type": "send", "message": {"text": "go"}})
        start = receive(socket, 6)[0]
        socket.send_json(
            {
                "type": "send",
                "contextId": start["contextId"],
                "message": {"text": "b"},
                "requestId": "req-2",
            }
        )
        busy = json.loads(socket.receive_text())
        assert busy == {
            "type": "rejected",
            "code": "context_busy",
            "message": busy["message"],
            "retryable": True,
            "command": "send",
            "contextId": start["contextId"],
            "requestId": "req-2",
            "interruptId": None,
        }
        socket.send_json({"type": "stop", "contextId": start["contextId"]})
        assert until_done(socket)[-1]["stopReason"] == "stopped"
        socket.send_json({"type": "attach", "contextId": "ctx-" + "0" * 36})
        assert json.loads(socket.receive_text())["code"] == "context_not_found"
        socket.send_json({"type": "send", "message": {"text": "  "}})
        assert json.loads(socket.receive_text())["code"] == "invalid_request"
        socket.send_json({"type": "send", "message": {"text": "x" * (32 * 1024 + 1)}})
        assert json.loads(socket.receive_text())["code"] == "message_too_large"
        # After all of that the socket still works.
        open_gate(client)
        socket.send_json({"type": "attach", "contextId": start["contextId"], "after": 0})
        assert until_done(socket)[-1]["stopReason"] == "stopped"
    open_gate(client)
    assert Paced.effects == []


@pytest.mark.parametrize(
    ("payload", "code", "error"),
    [
        (b"\x00\x01binary", 1003, "binary_not_supported"),
        ("this is not json", 1007, "invalid_json"),
        ('["send"]', 1007, "invalid_json"),
        ("[" * 50_000, 1007, "invalid_json"),
        ('{"type": "send", "message": {"text": "' + "a" * 300_000 + '"}}', 1009, "body_too_large"),
    ],
)
def test_hostile_messages_get_an_error_frame_and_a_close(
    client: TestClient, payload: Any, code: int, error: str
) -> None:
    with client.websocket_connect(URL, subprotocols=PROTOCOL) as bystander:
        with client.websocket_connect(URL, subprotocols=PROTOCOL) as socket:
            if isinstance(payload, bytes):
                socket.send_bytes(payload)
            else:
                socket.send_text(payload)
            refused = json.loads(socket.receive_text())
            assert refused["code"] == error
            if payload == "[" * 50_000:  # says why, as HTTP does
                assert refused["message"] == "the message is nested too deeply"
            with pytest.raises(WebSocketDisconnect) as closed:
                socket.receive_text()
            assert closed.value.code == code
        open_gate(client)
        bystander.send_json({"type": "send", "message": {"text": "still fine"}})
        assert until_done(bystander)[-1]["stopReason"] == "end"


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ({"type": "dance"}, None),  # a newer client's command, say
        ({"type": "attach", "contextId": "ctx-" + "0" * 36, "after": "0"}, "attach"),
        ({"type": "attach", "contextId": "ctx-" + "0" * 36, "after": -1}, "attach"),
        ({"type": "send", "message": {"text": ""}}, "send"),
        ({"type": "send", "message": {"text": "hi"}, "colour": "red"}, "send"),
        ({"type": "stop", "requestId": "not a request id!"}, "stop"),
    ],
)
def test_a_command_the_server_cannot_take_is_refused_and_the_socket_goes_on(
    client: TestClient, command: dict[str, Any], kind: str | None
) -> None:
    with client.websocket_connect(URL, subprotocols=PROTOCOL) as socket:
        socket.send_json({"type": "send", "message": {"text": "first"}, "requestId": "r-1"})
        context_id = socket.receive_json()["contextId"]
        socket.send_json({**{"requestId": "r-2", "contextId": context_id}, **command})
        refused = next(f for f in iter(socket.receive_json, None) if f["type"] == "rejected")
        assert refused["code"] == "invalid_request" and refused["command"] == kind
        assert refused["requestId"] == (None if "requestId" in command else "r-2")
        open_gate(client)
        frames = until_done(socket)  # the run the socket followed still reaches it
    assert frames[-1]["contextId"] == context_id and frames[-1]["stopReason"] == "end"


def test_a_send_after_a_turn_names_the_conversation(client: TestClient) -> None:
    """A turn belongs to a conversation: without its `contextId` there is none to look in,
    which is the request's fault (as over HTTP), not a turn that is missing."""
    with client.websocket_connect("/agents/talker/ws", subprotocols=PROTOCOL) as socket:
        command = {"type": "send", "message": {"text": "hi"}, "requestId": "r-1"}
        socket.send_json({**command, "afterTurnId": "turn-000000000000-a0"})
        refused = socket.receive_json()
    assert (refused["type"], refused["code"], refused["requestId"]) == (
        "rejected",
        "invalid_request",
        "r-1",
    )
    assert "give its contextId" in refused["message"]


def test_handshake_checks(client: TestClient) -> None:
    with (
        pytest.raises(WebSocketDenialResponse) as foreign,
        client.websocket_connect(URL, headers={"origin": "https://evil.example"}),
    ):
        pass
    # Refused as HTTP refuses a request: typed, the protocol named.
    assert foreign.value.status_code == 403
    assert foreign.value.json()["error"]["code"] == "origin_not_allowed"
    assert foreign.value.headers["thinwire-protocol"] == "1"
    assert foreign.value.headers["x-content-type-options"] == "nosniff"
    with client.websocket_connect(URL, headers={"origin": "http://testserver"}) as same_site:
        same_site.send_json({"type": "attach", "contextId": "ctx-" + "0" * 36})
        assert json.loads(same_site.receive_text())["code"] == "context_not_found"
    with client.websocket_connect(URL, subprotocols=["thinwire.v2"]) as newer:
        assert json.loads(newer.receive_text())["code"] == "protocol_mismatch"
        with pytest.raises(WebSocketDisconnect) as closed:
            newer.receive_text()
        assert closed.value.code == 1002
    with client.websocket_connect("/agents/nobody/ws") as unknown:
        assert json.loads(unknown.receive_text())["code"] == "agent_not_found"
        with pytest.raises(WebSocketDisconnect) as closed:
            unknown.receive_text()
        assert closed.value.code == 4404


def test_unauthenticated_socket_is_closed_4401() -> None:
    app = app_for({"demo": DemoAgent}, identify=lambda connection: None)
    with TestClient(app) as client, client.websocket_connect(URL) as socket:
        assert json.loads(socket.receive_text())["code"] == "unauthenticated"
        with pytest.raises(WebSocketDisconnect) as closed:
            socket.receive_text()
        assert closed.value.code == 4401


def test_a_flood_of_commands_is_refused_and_others_go_on(client: TestClient) -> None:
    """Attaches beyond what one socket may follow and sends beyond the rate limit are
    refused with typed frames; the sockets and a bystander keep working."""
    with (
        client.websocket_connect(URL, subprotocols=PROTOCOL) as attacher,
        client.websocket_connect(URL, subprotocols=PROTOCOL, headers={"x-user": "spam"}) as sender,
        client.websocket_connect(
            "/agents/talker/ws", subprotocols=PROTOCOL, headers={"x-user": "calm"}
        ) as bystander,
    ):
        attacher.send_json({"type": "send", "message": {"text": "held at the gate"}})
        context_id = receive(attacher, 1)[0]["contextId"]
        for _ in range(200):
            attacher.send_json({"type": "attach", "contextId": context_id, "after": 0})
        while (frame := attacher.receive_json())["type"] != "rejected":
            pass
        assert frame["code"] == "too_many_streams"

        for n in range(100):
            sender.send_json({"type": "send", "message": {"text": f"spam {n}"}})
        while (frame := sender.receive_json())["type"] != "rejected":
            pass
        assert frame["code"] == "rate_limited"

        open_gate(client)
        bystander.send_json({"type": "send", "message": {"text": "unaffected"}})
        assert until_done(bystander)[-1]["stopReason"] == "end"


class Burst(Agent):
    """Says its reply in 50 deltas without awaiting: a burst, as a cached answer is."""

    async def run(self, run: Run, text: str) -> None:
        for i in range(50):
            await run.say(f"w{i} ")


def messages_until_done(socket: Any) -> list[list[dict[str, Any]]]:
    """Each message as the frames it holds, one per line."""
    messages: list[list[dict[str, Any]]] = []
    while not messages or messages[-1][-1]["type"] != "done":
        messages.append([json.loads(line) for line in socket.receive_text().split("\n")])
    return messages


@pytest.mark.parametrize("stored", [False, True], ids=["live", "replayed"])
def test_under_the_lines_subprotocol_a_burst_leaves_as_few_messages_of_a_frame_a_line(
    stored: bool,
) -> None:
    app = app_for({"burst": Burst}, heartbeat_interval=None)
    offered = ["thinwire.v1.lines", "thinwire.v1"]
    with TestClient(app) as client:
        with client.websocket_connect("/agents/burst/ws", subprotocols=offered) as socket:
            assert socket.accepted_subprotocol == "thinwire.v1.lines"
            socket.send_json({"type": "send", "message": {"text": "go"}})
            messages = messages_until_done(socket)
        if stored:  # the same frames read back from the event log after the run
            context_id = messages[0][0]["contextId"]
            with client.websocket_connect("/agents/burst/ws", subprotocols=offered) as socket:
                socket.send_json({"type": "attach", "contextId": context_id, "after": 0})
                messages = messages_until_done(socket)
        with client.websocket_connect("/agents/burst/ws", subprotocols=PROTOCOL) as socket:
            socket.send_json({"type": "send", "message": {"text": "go"}})
            one_each = messages_until_done(socket)
    frames = [frame for message in messages for frame in message]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert "".join(f["delta"] for f in frames if f["type"] == "token") == "".join(
        f"w{i} " for i in range(50)
    )
    assert len(messages) < len(frames) / 4  # batched: not a message per frame
    assert all(len(message) == 1 for message in one_each)  # thinwire.v1: one per message
    assert len(one_each) == len(frames)


def test_a_quiet_followed_run_gets_heartbeats_at_most_the_default_interval_apart() -> None:
    import asyncio

    Paced.gate = asyncio.Event()
    Paced.effects = []
    app = app_for({"demo": Paced}, heartbeat_interval=0.05)
    with TestClient(app) as client, client.websocket_connect(URL, subprotocols=PROTOCOL) as socket:
        socket.send_json({"type": "send", "message": {"text": "go"}})
        frames: list[dict[str, Any]] = []
        while len(frames) < 6:  # run_start and five words, then the run waits at its gate
            if (message := json.loads(socket.receive_text()))["type"] != "heartbeat":
                frames.append(message)
        # The run is quiet: only heartbeats come, each a message of no run.
        assert receive(socket, 2) == [{"type": "heartbeat"}] * 2
        open_gate(client)
        frames += [f for f in until_done(socket) if f["type"] != "heartbeat"]
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    # Heartbeats off, or rarer than a client assumes: a socket still hears every 15 s.
    assert socket_heartbeat(None) == socket_heartbeat(60) == HEARTBEAT_SECONDS == 15
    assert socket_heartbeat(0.05) == 0.05


def test_a_run_on_another_replica_gets_heartbeats_a_socket_expects_whatever_the_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attached through replica B to a run on replica A, a socket hears at least every
    `HEARTBEAT_SECONDS`, as the client's watch assumes, though the servers' own interval
    is far longer (SSE names the interval in a header; a socket cannot)."""
    import asyncio

    from thinwire.stores import MemoryStore

    monkeypatch.setattr(websocket, "HEARTBEAT_SECONDS", 0.05)
    Paced.gate = asyncio.Event()
    Paced.effects = []
    store = MemoryStore()
    coordinator = store.coordinator(lease_ttl=30)
    replica_a = app_for(
        {"demo": Paced}, store=store, coordinator=coordinator, heartbeat_interval=600
    )
    replica_b = app_for(
        {"demo": Paced}, store=store, coordinator=coordinator.replica(), heartbeat_interval=600
    )
    with (
        TestClient(replica_a) as a,
        TestClient(replica_b) as b,
        a.websocket_connect(URL, subprotocols=PROTOCOL) as on_a,
    ):
        on_a.send_json({"type": "send", "message": {"text": "go"}})
        frames = [f for f in receive(on_a, 6) if f["type"] != "heartbeat"]
        with b.websocket_connect(URL, subprotocols=PROTOCOL) as on_b:
            on_b.send_json({"type": "attach", "contextId": frames[0]["contextId"], "after": 0})
            heard: list[dict[str, Any]] = []
            while len([m for m in heard if m["type"] == "heartbeat"]) < 2:
                heard.append(json.loads(on_b.receive_text()))
        open_gate(a)
        until_done(on_a)
    assert [f["seq"] for f in heard if f["type"] != "heartbeat"] == [f["seq"] for f in frames]
