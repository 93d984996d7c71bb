"""A list says `running` only while some process runs the reply: a run whose process died
is recorded as interrupted as the list shows it, as a read of the conversation records it,
so the list, the transcript and the event log agree from the first list on."""

from __future__ import annotations

import logging
import secrets
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import HTTPConnection
from starlette.testclient import TestClient

from conftest import app_for, parse_sse
from thinwire import Agent, MemoryStore, Run, SQLiteStore
from thinwire.contexts import ContextRegistry
from thinwire.coordination.local import LocalCoordinator
from thinwire.errors import StoreError
from thinwire.records import ContextRecord
from thinwire.runner import begin_run
from thinwire.stores import Store

ADA = {"x-user": "ada"}
TOKEN = "listed-runs-operator-token"


class Echo(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say(f"{text}, said ada")


AGENTS = {"chat": Echo}


def by_header(connection: HTTPConnection) -> str | None:
    return connection.headers.get("x-user")


def app_over(store: Store) -> TestClient:
    return TestClient(app_for(AGENTS, identify=by_header, store=store, operator_token=TOKEN))


@pytest.fixture(params=["memory", "sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return MemoryStore()
    if request.param == "sqlite":
        return SQLiteStore(tmp_path / "t.db")
    from thinwire.stores.redis import RedisStore

    prefix = f"test-{secrets.token_hex(4)}"
    return RedisStore.from_url(request.getfixturevalue("redis_url"), prefix=prefix)


def registry_of(client: TestClient) -> ContextRegistry:
    registry: ContextRegistry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
    return registry


def another_process(client: TestClient, *, alive: bool) -> ContextRegistry:
    """The registry of another process over the same store: a replica, whose leases this
    one sees, when `alive`; else one whose leases this one never sees."""
    registry = registry_of(client)
    coordinator = registry.store.coordinator(lease_ttl=10.0)  # Redis: another replica's
    if alive and isinstance(registry.coordinator, LocalCoordinator):
        coordinator = registry.coordinator.replica()
    return ContextRegistry(registry.store, AGENTS, coordinator=coordinator)


def start_run(client: TestClient, *, alive: bool) -> str:
    """A run of ada's that another process starts and flushes half a reply of; then, unless
    `alive`, the process dies there."""
    other = another_process(client, alive=alive)

    async def start() -> str:
        context = other.create("chat", "ada")
        log = await begin_run(other, context, "hello")
        log.run_start("chat", *context.record.next_turn_ids())
        log.token("half a reply")
        await log.flush(other.store)
        if not alive:  # its lease goes, as a dead replica's expires in Redis
            assert context.lease is not None
            await other.coordinator.release(context.lease)
        return context.id

    assert client.portal is not None
    context_id: str = client.portal.call(start)
    return context_id


def conversation(client: TestClient, text: str) -> str:
    response = client.post("/agents/chat/runs", json={"message": {"text": text}}, headers=ADA)
    assert response.status_code == 200, response.text
    context_id: str = parse_sse(response.text)[0]["contextId"]
    return context_id


def listed(client: TestClient, **query: Any) -> dict[str, Any]:
    response = client.get("/agents/chat/contexts", params=query, headers=ADA)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def turns(client: TestClient, context_id: str) -> list[dict[str, Any]]:
    response = client.get(f"/agents/chat/contexts/{context_id}", headers=ADA)
    assert response.status_code == 200, response.text
    return list(response.json()["turns"])


def stored(client: TestClient, context_id: str) -> ContextRecord:
    assert client.portal is not None
    record = client.portal.call(registry_of(client).store.load, context_id)
    assert record is not None
    return record


def listed_by_operator(client: TestClient, **query: Any) -> dict[str, Any]:
    response = client.get(
        "/admin/agents/chat/contexts",
        params={"owner": "ada", **query},
        headers={"authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("lister", [listed, listed_by_operator], ids=["user", "operator"])
def test_a_run_whose_process_died_is_listed_as_interrupted(store: Store, lister: Any) -> None:
    with app_over(store) as client:
        older = conversation(client, "older")
        dead = start_run(client, alive=False)
        newer = conversation(client, "newer")
        before = stored(client, dead).updated_at

        page = lister(client, limit=2)
        entries = {c["contextId"]: c for c in page["conversations"]}
        assert entries[dead]["status"] == "idle"
        assert entries[dead]["preview"] == "half a reply" and entries[dead]["turnCount"] == 2
        # Recorded just now, so the most recently active: and the next page goes on from
        # where the store's page ended, neither repeating a conversation nor missing one.
        assert list(entries) == [dead, newer] and entries[dead]["updatedAt"] > before
        rest = lister(client, limit=2, cursor=page["nextCursor"])
        assert [c["contextId"] for c in rest["conversations"]] == [older]

        # Recorded, not merely shown: the transcript, the store and the log agree.
        transcript = client.get(f"/agents/chat/contexts/{dead}", headers=ADA).json()
        assert transcript["activeRunId"] is None
        assert [t["stopReason"] for t in transcript["turns"]] == [None, "interrupted"]
        assert stored(client, dead).active_run is None
        replay = parse_sse(client.get(f"/agents/chat/contexts/{dead}/events", headers=ADA).text)
        assert (replay[-1]["type"], replay[-1]["stopReason"]) == ("done", "interrupted")
        assert listed(client)["conversations"][0] == entries[dead]


def test_a_run_alive_on_another_replica_is_listed_as_running(store: Store) -> None:
    with app_over(store) as client:
        alive = start_run(client, alive=True)
        [entry] = listed(client)["conversations"]
        assert entry["status"] == "running"
        assert stored(client, alive).active_run is not None  # nothing recorded
        assert turns(client, alive)[-1]["role"] == "user"  # the reply is still coming


class Counting(MemoryStore):
    """Names the reads it is asked for, with the context each reads."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def list_contexts(self, owner: str, agent: str, limit: int, after: Any = None) -> Any:
        self.reads.append("list")
        return await super().list_contexts(owner, agent, limit, after)

    async def load(self, context_id: str) -> Any:
        self.reads.append(f"load {context_id}")
        return await super().load(context_id)

    async def load_exchanges(self, context_id: str, positions: Any) -> Any:
        self.reads.append(f"exchanges {context_id}")
        return await super().load_exchanges(context_id, positions)

    async def read_events(self, context_id: str, after: int = 0) -> Any:
        self.reads.append(f"events {context_id}")
        return await super().read_events(context_id, after)


def test_a_list_reads_only_its_page_and_what_a_marked_run_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = Counting()
    with app_over(store) as client:
        for text in ("one", "two", "three"):
            conversation(client, text)
        coordinator = registry_of(client).coordinator
        asked: list[str] = []
        holder = coordinator.holder

        async def counted(context_id: str) -> str | None:
            asked.append(context_id)
            return await holder(context_id)

        monkeypatch.setattr(coordinator, "holder", counted)
        store.reads.clear()
        assert [c["status"] for c in listed(client)["conversations"]] == ["idle"] * 3
        assert store.reads == ["list"] and asked == []  # no running entry: nothing more

        alive = start_run(client, alive=True)
        store.reads.clear()
        assert listed(client)["conversations"][0]["status"] == "running"
        assert store.reads == ["list"] and asked == [alive]  # alive: its lease says so

        dead = start_run(client, alive=False)
        store.reads.clear()
        assert [c["status"] for c in listed(client)["conversations"][:2]] == ["idle", "running"]
        assert {read.partition(" ")[2] for read in store.reads[1:]} == {dead}  # only it loaded
        store.reads.clear()
        assert [c["status"] for c in listed(client)["conversations"][:2]] == ["idle", "running"]
        assert store.reads == ["list"]  # recorded once: the store's list says so since


class Refusing(MemoryStore):
    """Refuses the calls named in `refused`, as a store that is down or full."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: set[str] = set()

    def check(self, call: str) -> None:
        if call in self.refused:
            raise StoreError("the store is unavailable; try again shortly")

    async def save(self, record: ContextRecord, **options: Any) -> int:
        self.check("save")
        return await super().save(record, **options)

    async def load(self, context_id: str) -> Any:
        self.check("load")
        return await super().load(context_id)


def test_a_list_does_not_fail_when_a_dead_run_cannot_be_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = Refusing()
    with app_over(store) as client:
        dead = start_run(client, alive=False)
        store.refused = {"load"}  # the run's record cannot be read: the store's summary
        with caplog.at_level(logging.WARNING, "thinwire"):
            assert listed(client)["conversations"][0]["status"] == "running"
        assert dead in caplog.text

        store.refused = {"save"}  # read, but not recorded: shown as the transcript shows it
        [entry] = listed(client)["conversations"]
        assert entry["status"] == "idle"
        assert turns(client, dead)[-1]["stopReason"] == "interrupted"
        assert stored(client, dead).active_run is not None  # not recorded yet

        store.refused = set()  # the store takes writes again: the next list records it
        assert listed(client)["conversations"][0]["status"] == "idle"
        assert stored(client, dead).active_run is None


def test_a2a_lists_the_task_of_a_dead_run_as_interrupted() -> None:
    with app_over(MemoryStore()) as client:
        dead = start_run(client, alive=False)
        call = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        response = client.post("/a2a/chat", json=call, headers={**ADA, "A2A-Version": "1.0"})
        [task] = response.json()["result"]["tasks"]
        assert task["contextId"] == dead and task["status"]["state"] == "TASK_STATE_FAILED"
        code = task["status"]["message"]["metadata"]["thinwire"]["code"]
        assert code == "run_interrupted"
        assert listed(client)["conversations"][0]["status"] == "idle"
