"""Several replicas on one Redis: any request may land on any replica, nothing breaks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from conftest import parse_sse
from test_uvicorn import events, wait_for
from thinwire.testing import ServerProcess, serve

TOKEN = "replica-operator-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}


class Replicas:
    def __init__(self, redis_url: str, root: Path, delay: float) -> None:
        self.env = {
            "THINWIRE_OPERATOR_TOKEN": TOKEN,
            "THINWIRE_DEMO_SECRET": "shared-secret-of-the-replicas",
            "THINWIRE_LEASE_TTL": "1",
        }
        self.store = f"{redis_url}?prefix=replicas-{root.name}"
        self.root = root
        self.delay = delay

    def start(self, name: str) -> Any:
        data = self.root / name
        args = ("demo", "--delay", str(self.delay), "--data-dir", str(data), "--store", self.store)
        return serve(*args, env=self.env, log_dir=self.root)

    def ledger(self) -> list[str]:
        lines: list[str] = []
        for path in sorted(self.root.glob("*/ledger.log")):
            lines += path.read_text().splitlines()
        return lines


@pytest.fixture
def pair(redis_url: str, tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess, Replicas]]:
    replicas = Replicas(redis_url, tmp_path, delay=0.05)
    with replicas.start("a") as a, replicas.start("b") as b:
        yield a, b, replicas


def run(server: ServerProcess, text: str, context_id: str | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"message": {"text": text}}
    if context_id:
        body["contextId"] = context_id
    response = httpx.post(f"{server.url}/agents/demo/runs", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def test_a_conversation_alternating_between_replicas(pair: Any) -> None:
    a, b, _ = pair
    first = run(a, "my name is Ada")
    context_id = first[0]["contextId"]
    second = run(b, "who am I?", context_id)
    third = run(a, "and again?", context_id)
    assert "Earlier you told me “my name is Ada”" in second[-1]["text"]
    assert "Earlier you told me “my name is Ada”" in third[-1]["text"]
    seqs = [f["seq"] for f in first + second + third]
    assert seqs == list(range(1, len(seqs) + 1))
    # No stale cache: each replica's run saw the other's writes.
    state = httpx.get(f"{b.url}/admin/agents/demo/contexts/{context_id}/state", headers=AUTH).json()
    assert state["state"]["messages_seen"] == 3
    transcript = httpx.get(f"{a.url}/agents/demo/contexts/{context_id}").json()
    assert [t["text"] for t in transcript["turns"][::2]] == [
        "my name is Ada",
        "who am I?",
        "and again?",
    ]


def test_reattach_on_the_other_replica_mid_stream(pair: Any) -> None:
    a, b, _ = pair
    with httpx.Client(timeout=30) as client:
        with client.stream(
            "POST", f"{a.url}/agents/demo/runs", json={"message": {"text": "long one"}}
        ) as response:
            stream = events(response)
            seen = [next(stream) for _ in range(3)]
        context_id = seen[0]["contextId"]
        live = httpx.get(f"{b.url}/agents/demo/contexts/{context_id}").json()
        assert live["activeRunId"] == seen[0]["runId"]  # B knows A is running it
        rest = parse_sse(
            client.get(
                f"{b.url}/agents/demo/contexts/{context_id}/events",
                headers={"Last-Event-ID": str(seen[-1]["seq"])},
            ).text
        )
    frames = seen + rest
    assert [f["seq"] for f in frames] == list(range(1, len(frames) + 1))
    assert frames[-1]["type"] == "done" and frames[-1]["stopReason"] == "end"
    assert "".join(f["delta"] for f in frames if f["type"] == "token") == frames[-1]["text"]


def test_stop_on_the_other_replica_reaches_the_run(pair: Any) -> None:
    a, b, _ = pair
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST", f"{a.url}/agents/demo/runs", json={"message": {"text": "stop me"}}
        ) as response,
    ):
        stream = events(response)
        start = next(stream)
        assert start is not None
        stopped = client.post(f"{b.url}/agents/demo/contexts/{start['contextId']}/stop").json()
        assert stopped["stopping"] is True and stopped["runId"] == start["runId"]
        done = [f for f in stream if f is not None][-1]
    assert done["type"] == "done" and done["stopReason"] == "stopped"


def test_a_decision_on_the_other_replica(pair: Any) -> None:
    a, b, replicas = pair
    asked = run(a, "a refund please")
    request = asked[-2]["interrupt"]
    resumed = httpx.post(
        f"{b.url}/agents/demo/contexts/{asked[0]['contextId']}/decisions",
        json={"interruptId": request["interruptId"], "value": "approve"},
        timeout=30,
    )
    assert parse_sse(resumed.text)[-1]["text"] == "Done — $40 is on its way back for order 1234."
    assert sorted(replicas.ledger()) == ["issue_refund 1234 40", "lookup_order 1234"]


def test_a_stop_of_a_question_answered_on_the_other_replica_meanwhile(pair: Any) -> None:
    """A knew the question as waiting; B answered it, and its run ended. A's stop finds
    nothing to stop, rather than failing on the question it remembered."""
    a, b, _ = pair
    asked = run(a, "a refund please")
    context_id, request = asked[0]["contextId"], asked[-2]["interrupt"]
    decided = httpx.post(
        f"{b.url}/agents/demo/contexts/{context_id}/decisions",
        json={"interruptId": request["interruptId"], "value": "approve"},
        timeout=30,
    )
    assert parse_sse(decided.text)[-1]["stopReason"] == "end"
    stopped = httpx.post(f"{a.url}/agents/demo/contexts/{context_id}/stop", timeout=30)
    assert stopped.status_code == 200 and stopped.json()["stopping"] is False
    turns = httpx.get(f"{a.url}/agents/demo/contexts/{context_id}").json()["turns"]
    assert turns[-1]["stopReason"] == "end"  # the answered run's reply, untouched


def test_concurrent_sends_from_both_replicas_make_one_run(pair: Any) -> None:
    a, b, _ = pair
    context_id = run(a, "hello")[0]["contextId"]
    body = {"contextId": context_id, "message": {"text": "at once"}}
    results: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def send(name: str, server: ServerProcess) -> None:
        barrier.wait()
        response = httpx.post(f"{server.url}/agents/demo/runs", json=body, timeout=30)
        results[name] = (response.status_code, response.text)

    threads = [threading.Thread(target=send, args=item) for item in (("a", a), ("b", b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    statuses = sorted(status for status, _ in results.values())
    assert statuses == [200, 409]
    busy = next(text for status, text in results.values() if status == 409)
    assert '"context_busy"' in busy
    turns = httpx.get(f"{a.url}/agents/demo/contexts/{context_id}").json()["turns"]
    assert [t["text"] for t in turns[::2]] == ["hello", "at once"]


def test_a_replica_dying_mid_run_frees_the_context(redis_url: str, tmp_path: Path) -> None:
    replicas = Replicas(redis_url, tmp_path, delay=0.2)
    with replicas.start("b") as b:
        with replicas.start("a") as a, httpx.Client(timeout=30) as client:
            done = run(a, "first, finished")
            context_id = done[0]["contextId"]
            body = {"contextId": context_id, "message": {"text": "second, killed"}}
            with client.stream("POST", f"{a.url}/agents/demo/runs", json=body) as response:
                stream = events(response)
                next(stream)
                a.kill()

        # B lists the run as running while A's lease lasts, then as over: recorded so.
        def listed_idle() -> bool:
            [entry] = httpx.get(f"{b.url}/agents/demo/contexts", timeout=30).json()["conversations"]
            return bool(entry["status"] == "idle")

        wait_for(listed_idle, timeout=10)
        read = httpx.get(f"{b.url}/agents/demo/contexts/{context_id}", timeout=30).json()
        assert read["activeRunId"] is None and read["turns"][-1]["stopReason"] == "interrupted"

        # B refuses while A's lease lasts, then takes over within the lease's time.
        def usable() -> bool:
            response = httpx.post(
                f"{b.url}/agents/demo/runs",
                json={"contextId": context_id, "message": {"text": "third"}},
                timeout=30,
            )
            return response.status_code == 200

        wait_for(usable, timeout=10)
        turns = httpx.get(f"{b.url}/agents/demo/contexts/{context_id}").json()["turns"]
    assert [(t["role"], t["stopReason"]) for t in turns] == [
        ("user", None),
        ("assistant", "end"),
        ("user", None),
        ("assistant", "interrupted"),
        ("user", None),
        ("assistant", "end"),
    ]
    assert turns[1]["text"] == done[-1]["text"]  # nothing finished was lost


def test_following_a_silent_run_through_the_other_replica(redis_url: str, tmp_path: Path) -> None:
    """A run silent for longer than the Redis client's read timeout (a slow tool, a model
    thinking) is followed through the other replica without the stream breaking."""
    replicas = Replicas(redis_url, tmp_path, delay=7.0)
    with (
        replicas.start("a") as a,
        replicas.start("b") as b,
        httpx.Client(timeout=60) as client,
        client.stream("POST", f"{a.url}/agents/demo/runs", json={"message": {"text": "hm"}}) as r,
    ):
        start = next(events(r))
        assert start is not None
        url = f"{b.url}/agents/demo/contexts/{start['contextId']}/events"
        with client.stream("GET", url, headers={"Last-Event-ID": str(start["seq"])}) as through_b:
            following = (f for f in events(through_b) if f is not None)
            seqs, last = [start["seq"]], time.monotonic()
            for frame in following:
                seqs.append(frame["seq"])
                silence, last = time.monotonic() - last, time.monotonic()
                if silence > 5:  # longer than the old 5 s read timeout…
                    break
            client.post(f"{b.url}/agents/demo/contexts/{start['contextId']}/stop")
            done = [*following][-1]
    assert silence > 5
    assert seqs == list(range(seqs[0], seqs[-1] + 1))  # …and the stream went on, whole
    assert done["type"] == "done" and done["stopReason"] == "stopped"


@pytest.mark.parametrize("stop", [False, True], ids=["killed", "killed-then-stopped"])
def test_a_dead_replicas_run_is_recorded_on_every_replica(
    redis_url: str, tmp_path: Path, stop: bool
) -> None:
    """B has the context cached while A runs it; A dies; within the lease's time B both
    reads and streams the run as interrupted, keeping the text A had flushed. A stop sent
    through B meanwhile cannot reach the run but is kept: the run ends `stopped`."""
    replicas = Replicas(redis_url, tmp_path, delay=0.3)
    with replicas.start("b") as b, httpx.Client(timeout=30) as client:
        with replicas.start("a") as a:
            body = {"message": {"text": "a long one"}}
            with client.stream("POST", f"{a.url}/agents/demo/runs", json=body) as response:
                stream = events(response)
                seen = [f for f in (next(stream) for _ in range(6)) if f is not None]
                context_id = seen[0]["contextId"]
                live = client.get(f"{b.url}/agents/demo/contexts/{context_id}").json()
                assert live["activeRunId"] == seen[0]["runId"]  # cached on B, running on A
                a.kill()
        if stop:
            stopping = client.post(f"{b.url}/agents/demo/contexts/{context_id}/stop").json()
            assert stopping["stopping"] is True and stopping["runId"] == seen[0]["runId"]
        reattached = client.get(
            f"{b.url}/agents/demo/contexts/{context_id}/events",
            headers={"Last-Event-ID": str(seen[-1]["seq"])},
        )
        done = parse_sse(reattached.text)[-1]
        transcript = client.get(f"{b.url}/agents/demo/contexts/{context_id}").json()
    ended = "stopped" if stop else "interrupted"
    assert done["type"] == "done" and done["stopReason"] == ended
    assert transcript["activeRunId"] is None
    assert transcript["turns"][-1]["stopReason"] == ended
    assert transcript["turns"][-1]["text"] == done["text"]  # what A had flushed
