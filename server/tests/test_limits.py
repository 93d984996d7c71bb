"""Per-principal rate limits: a flood from one principal is refused, nobody else is."""

from __future__ import annotations

import asyncio
import time

import pytest
from starlette.requests import HTTPConnection
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from conftest import app_for, parse_sse
from thinwire import Agent, MemoryStore, Run
from thinwire.errors import TooManyRequests
from thinwire.limits import RateLimiter


class Quick(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("ok")


def test_bucket_refills_over_time() -> None:
    now = [0.0]
    limiter = RateLimiter(per_second=2, burst=3, clock=lambda: now[0])
    for _ in range(3):
        limiter.take("ada")
    with pytest.raises(TooManyRequests, match=r"try again in 1 s") as refused:
        limiter.take("ada")  # 0.5 s to wait: as Retry-After says it, in whole seconds
    assert refused.value.retry_after == 1
    limiter.take("eve")  # another principal has a bucket of its own
    now[0] = 0.5
    limiter.take("ada")
    with pytest.raises(TooManyRequests):
        limiter.take("ada")
    now[0] = 100.0
    for _ in range(3):  # refilled, but never above the burst
        limiter.take("ada")
    with pytest.raises(TooManyRequests):
        limiter.take("ada")


def test_the_limiter_forgets_idle_principals_beyond_its_bound() -> None:
    limiter = RateLimiter(per_second=1, burst=1, clock=lambda: 0.0, max_principals=2)
    limiter.take("a")
    limiter.take("b")
    limiter.take("c")  # "a" is forgotten, so it starts over with a full bucket
    limiter.take("a")
    with pytest.raises(TooManyRequests):
        limiter.take("c")


def test_a_thousand_rapid_sends_from_one_principal() -> None:
    store = MemoryStore()

    def identify(connection: HTTPConnection) -> str:
        return connection.headers.get("x-user", "flooder")

    app = app_for(
        {"demo": Quick}, identify=identify, store=store, run_burst=20, runs_per_second=0.001
    )
    with TestClient(app) as client:
        statuses = [
            client.post("/agents/demo/runs", json={"message": {"text": f"{n}"}}).status_code
            for n in range(1000)
        ]
        refused = client.post("/agents/demo/runs", json={"message": {"text": "again"}})
        other = client.post(
            "/agents/demo/runs", json={"message": {"text": "hi"}}, headers={"x-user": "calm"}
        )
    assert statuses.count(200) == 20 and statuses.count(429) == 980
    assert refused.json()["error"]["code"] == "rate_limited"
    wait = int(refused.headers["retry-after"])  # 1,000 s for the next token
    assert refused.json()["error"]["message"] == f"too many runs; try again in {wait} s"
    assert other.status_code == 200
    assert len(store._records) == 21  # nothing stored for a refused send


def test_one_principals_runs_in_progress_are_capped_everyone_elses_are_not() -> None:
    """Runs going on with nobody following them still count: past `max_runs`, a send on
    any face is refused with 429 too_many_runs before anything is stored; a run that
    ends, however, gives its place back."""
    from test_streams import Paced, open_gate

    Paced.gate = asyncio.Event()
    store = MemoryStore()
    app = app_for(
        {"demo": Paced},
        identify=lambda c: c.headers.get("x-user"),
        store=store,
        max_runs=2,
        max_streams=0,
        heartbeat_interval=None,
    )
    ada, bob = {"x-user": "ada"}, {"x-user": "bob"}
    with TestClient(app) as client:
        runs = client.app.state.thinwire.runs  # type: ignore[attr-defined]
        with client.websocket_connect("/agents/demo/ws", headers=ada) as socket:
            for n in range(3):
                socket.send_json({"type": "send", "message": {"text": "go"}, "requestId": f"r{n}"})
            started, refused = [], None
            while refused is None or len(started) < 2:
                frame = socket.receive_json()
                if frame["type"] == "run_start":
                    started.append(frame["contextId"])
                elif frame["type"] == "rejected":
                    refused = frame
            assert (refused["requestId"], refused["code"]) == ("r2", "too_many_runs")
            assert refused["retryable"] is True
            # Nobody follows the two runs now; they go on, and still count.
        assert runs.count("ada") == 2
        send = {"message": {"text": "go"}}
        http = client.post("/agents/demo/runs", json=send, headers=ada)
        assert http.status_code == 429 and http.json()["error"]["code"] == "too_many_runs"
        assert http.json()["error"]["message"].startswith("at most 2 runs may be in progress")
        assert "retry-after" in http.headers
        chat = {
            "id": "chat-1",
            "messages": [{"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
            "trigger": "submit-message",
        }
        ai_sdk = client.post("/ai-sdk/demo/chat", json=chat, headers=ada)
        assert ai_sdk.status_code == 429 and "too_many_runs" in ai_sdk.text
        assert len(store._records) == 2  # nothing stored for a refused send
        with client.websocket_connect("/agents/demo/ws", headers=bob) as socket:
            socket.send_json({"type": "send", "message": {"text": "go"}})
            assert socket.receive_json()["type"] == "run_start"  # bob is not ada
        # Stopping one run gives its place back at once.
        stop = client.post(f"/agents/demo/contexts/{started[0]}/stop", headers=ada)
        assert stop.json()["stopping"] is True
        deadline = time.monotonic() + 5
        while runs.count("ada") > 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert runs.count("ada") == 1
        open_gate(client)
        again = parse_sse(client.post("/agents/demo/runs", json=send, headers=ada).text)
        assert again[-1]["type"] == "done" and again[-1]["stopReason"] == "end"
        deadline = time.monotonic() + 5
        while (runs.count("ada") or runs.count("bob")) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert runs.count("ada") == runs.count("bob") == 0


def test_one_principals_open_streams_are_capped_everyone_elses_are_not() -> None:
    """Idle followers of one principal, over SSE and WebSockets together, stop at the cap
    with 429 too_many_streams; closing one frees its place; another principal is
    unaffected."""
    from test_streams import Paced, open_gate
    from thinwire.limits import Cap

    Paced.gate = asyncio.Event()
    app = app_for(
        {"demo": Paced},
        identify=lambda c: c.headers.get("x-user"),
        max_streams=3,
        heartbeat_interval=None,
    )
    with TestClient(app) as client:
        streams: Cap = client.app.state.thinwire.streams  # type: ignore[attr-defined]
        ws = "/agents/demo/ws"
        with client.websocket_connect(ws, headers={"x-user": "ada"}) as socket:  # one
            socket.send_json({"type": "send", "message": {"text": "go"}})  # two
            context_id = socket.receive_json()["contextId"]
            socket.send_json({"type": "attach", "contextId": context_id})  # three
            while streams.count("ada") < 3:
                socket.send_json({"type": "attach", "contextId": context_id})
            events = f"/agents/demo/contexts/{context_id}/events"
            refused = client.get(events, headers={"x-user": "ada"})
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "too_many_streams"
            assert refused.headers["retry-after"] == "1"
            # It says whose streams count, and what frees them: a client left open holds one.
            cause = (
                "at most 3 streams (SSE responses, WebSockets and the runs they follow) may be "
                "open at once for this user: close clients you no longer use"
            )
            assert refused.json()["error"]["message"] == cause
            socket.send_json({"type": "attach", "contextId": context_id, "requestId": "r-4"})
            while (frame := socket.receive_json()).get("requestId") != "r-4":
                pass  # frames of the runs followed, and refusals of attaches sent above
            assert (frame["type"], frame["code"], frame["message"]) == (
                "rejected",
                "too_many_streams",
                cause,
            )
            with (
                pytest.raises(WebSocketDisconnect) as closed,
                client.websocket_connect(ws, headers={"x-user": "ada"}) as second,
            ):
                second.receive_json()
                second.receive_json()
            assert closed.value.code == 4429
            # The other faces' streams count against the same cap.
            ada = {"x-user": "ada"}
            chat = {
                "id": "chat-1",
                "messages": [
                    {"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
                ],
                "trigger": "submit-message",
            }
            ai_sdk = client.post("/ai-sdk/demo/chat", json=chat, headers=ada)
            assert ai_sdk.status_code == 429 and "too_many_streams" in ai_sdk.text
            run = {
                "threadId": "t-1",
                "runId": "r-1",
                "state": {},
                "tools": [],
                "context": [],
                "forwardedProps": {},
                "messages": [{"id": "m-1", "role": "user", "content": "hi"}],
            }
            ag_ui = client.post("/ag-ui/demo", json=run, headers=ada)
            assert ag_ui.status_code == 429 and "too_many_streams" in ag_ui.text
            message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
            rpc = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendStreamingMessage",
                "params": {"message": message},
            }
            a2a = client.post("/a2a/demo", json=rpc, headers={**ada, "A2A-Version": "1.0"})
            assert a2a.json()["error"]["data"][0]["metadata"]["code"] == "too_many_streams"
            # Another principal streams as usual.
            with client.websocket_connect(ws, headers={"x-user": "bob"}) as bob:
                bob.send_json({"type": "send", "message": {"text": "hi"}})
                assert bob.receive_json()["type"] == "run_start"
            open_gate(client)
        # Every stream's place is given back once its task has wound down.
        deadline = time.monotonic() + 5
        while streams.count("ada") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert streams.count("ada") == 0


def test_a_stream_with_nothing_to_send_frees_its_place() -> None:
    """A follow of a run that is over answers 204 and is no longer counted: a page
    reconnecting to finished conversations never runs into the cap."""
    app = app_for({"demo": Quick}, identify=lambda c: c.headers.get("x-user"), max_streams=1)
    ada = {"x-user": "ada"}
    with TestClient(app) as client:
        streams = client.app.state.thinwire.streams  # type: ignore[attr-defined]
        frames = parse_sse(
            client.post("/agents/demo/runs", json={"message": {"text": "hi"}}, headers=ada).text
        )
        done = frames[-1]
        events = f"/agents/demo/contexts/{done['contextId']}/events"
        chat = {
            "id": "chat-1",
            "messages": [{"id": "m-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
            "trigger": "submit-message",
        }
        assert client.post("/ai-sdk/demo/chat", json=chat, headers=ada).status_code == 200
        for _ in range(3):
            followed = client.get(events, headers={**ada, "Last-Event-ID": str(done["seq"])})
            assert followed.status_code == 204
            assert client.get("/ai-sdk/demo/chat/chat-1/stream", headers=ada).status_code == 204
        assert streams.count("ada") == 0
