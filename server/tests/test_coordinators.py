"""The coordinator conformance suite: every Coordinator must pass all of it.

Each test gets two coordinators of different owners over the same leases (two replicas)
and the store that goes with them.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from thinwire.coordination import Coordinator, LocalCoordinator
from thinwire.coordination.redis import RedisCoordinator
from thinwire.errors import LeaseLost
from thinwire.records import ContextRecord
from thinwire.stores import Event, SQLiteStore, Store
from thinwire.stores.redis import RedisStore

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Replicas:
    store: Store
    a: Coordinator
    b: Coordinator


@pytest.fixture(params=["local", "redis"])
async def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Replicas]:
    store: Store
    if request.param == "local":
        store = SQLiteStore(tmp_path / "t.db")
        a = store.coordinator(lease_ttl=30)
        assert isinstance(a, LocalCoordinator)
        b: Coordinator = a.replica()
    else:
        url = request.getfixturevalue("redis_url")
        store = RedisStore.from_url(url, prefix=f"test-{secrets.token_hex(4)}")
        a, b = store.coordinator(lease_ttl=30), store.coordinator(lease_ttl=30)
        assert isinstance(a, RedisCoordinator)
    assert a.replica_id != b.replica_id
    yield Replicas(store, a, b)
    await store.close()


def record(**state: int) -> ContextRecord:
    return ContextRecord(id="ctx-1", agent="demo", owner="ada", state=dict(state))


async def test_a_lease_has_one_owner_until_released(replicas: Replicas) -> None:
    a, b = replicas.a, replicas.b
    first = await a.acquire("ctx-1")
    assert first is not None
    assert await b.acquire("ctx-1") is None
    assert await a.holder("ctx-1") == a.replica_id
    assert await a.renew(first)
    await b.release(first)  # not b's to release
    assert await b.holder("ctx-1") == a.replica_id
    await a.release(first)
    assert await a.holder("ctx-1") is None
    second = await b.acquire("ctx-1")
    assert second is not None and second.token > first.token  # tokens only grow
    assert not await a.renew(first)


async def test_a_lease_ends_by_itself(replicas: Replicas) -> None:
    a, b = replicas.a, replicas.b
    a.lease_ttl = 0.2
    lease = await a.acquire("ctx-1")
    assert lease is not None
    await asyncio.sleep(0.3)
    assert await b.holder("ctx-1") is None
    assert not await a.renew(lease)
    assert await b.acquire("ctx-1") is not None


async def test_a_fenced_save_lands_only_under_its_lease(replicas: Replicas) -> None:
    store, a, b = replicas.store, replicas.a, replicas.b
    await store.create(record())
    a.lease_ttl = 0.2
    stale = await a.acquire("ctx-1")
    await asyncio.sleep(0.3)  # replica a pauses; its lease runs out
    fresh = await b.acquire("ctx-1")
    assert stale is not None and fresh is not None
    if a.fence(stale) is None:
        # One process: no other process writes, so there is nothing to fence out.
        assert isinstance(a, LocalCoordinator) and b.fence(fresh) is None
        return
    with pytest.raises(LeaseLost):
        await store.save(record(by=1), expected_version=1, fence=a.fence(stale))
    assert await store.save(record(by=2), expected_version=1, fence=b.fence(fresh)) == 2
    loaded = await store.load("ctx-1")
    assert loaded is not None and loaded.state == {"by": 2}


async def test_stop_requests_reach_the_other_replica(replicas: Replicas) -> None:
    assert not await replicas.b.stop_requested("run-1")
    await replicas.a.request_stop("run-1")
    assert await replicas.b.stop_requested("run-1")
    assert not await replicas.b.stop_requested("run-2")


async def test_a_ticket_is_used_once_across_replicas(replicas: Replicas) -> None:
    a, b = replicas.a, replicas.b
    secret = await a.secret()
    assert await a.use_once("signature-1", 30, secret)
    assert not await b.use_once("signature-1", 30, secret)
    assert not await a.use_once("signature-1", 30, secret)
    assert await b.use_once("signature-2", 0.1, secret)
    await asyncio.sleep(0.3)
    assert await a.use_once("signature-2", 30, secret)  # remembered only as long as asked


async def test_replicas_share_a_secret_made_again_when_the_store_lost_it(
    replicas: Replicas,
) -> None:
    a, b = replicas.a, replicas.b
    secret = await a.secret()
    assert len(secret) == 32 and await b.secret() == secret == await a.secret()
    assert not await b.use_once("signature-1", 30, bytes(32))  # checked with another secret
    if not isinstance(a, RedisCoordinator):
        return
    await a.redis.delete(a.store.key("secret", "tickets"))  # a flush, an eviction
    assert not await b.use_once("signature-2", 30, secret)  # the lost secret accepts nothing
    again = await b.secret()
    assert again != secret and await a.secret() == again
    assert await a.use_once("signature-2", 30, again)


async def test_a_copy_is_stale_only_when_another_process_may_have_written(
    replicas: Replicas,
) -> None:
    store, a = replicas.store, replicas.a
    await store.create(record())
    assert not await a.stale(store, "ctx-1", 1)
    await store.save(record(count=1), expected_version=1)
    # A store shared by replicas tells; one process owns its store and knows already.
    assert await a.stale(store, "ctx-1", 1) is (a.keepalive is not None)


def frame(seq: int, run_id: str, kind: str = "token") -> Event:
    data = json.dumps({"contextId": "ctx-1", "runId": run_id, "seq": seq, "type": kind})
    return Event(seq, run_id, data, float(seq))


async def test_following_a_run_elsewhere_reads_its_frames_to_done(replicas: Replicas) -> None:
    store = replicas.store
    await store.create(record())
    await store.append_events("ctx-1", [frame(1, "run-0", "done"), frame(2, "run-1")])
    checks: list[int] = []

    async def still_running() -> bool:
        checks.append(1)
        await store.append_events("ctx-1", [frame(3, "run-1"), frame(4, "run-1", "done")])
        return True

    source = replicas.b.follow(
        store, "ctx-1", "run-1", 1, heartbeat=0.1, still_running=still_running
    )
    batches = [batch async for batch in source.batches()]
    seqs = [seq for batch in batches if batch for seq, _ in batch]
    assert seqs == [2, 3, 4] and None in batches and checks == [1]


async def test_a_followed_remote_run_beats_on_time_though_leases_are_checked_more_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each wait for frames ends when the next heartbeat or lease check is due, whichever
    comes first: waiting a whole check past a heartbeat's time would send it late (at 20 s
    for 15 s with 10 s leases), and a WebSocket client takes 30 s of silence as broken."""
    from thinwire.coordination import base

    clock = [0.0]
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    waits: list[float] = []

    class Silent:
        async def follow_events(self, context_id: str, after: int, timeout: float) -> list[Event]:
            waits.append(timeout)
            clock[0] += timeout
            return []

    checks: list[float] = []

    async def still_running() -> bool:
        checks.append(clock[0])
        return True

    source = base.RemoteRun(
        Silent(),  # type: ignore[arg-type]
        "ctx-1",
        "run-1",
        0,
        15.0,
        still_running,
        check_every=10.0,
    )
    beats: list[float] = []
    async for batch in source.batches():
        assert batch is None
        beats.append(clock[0])
        if len(beats) == 3:
            break
    assert beats == [15.0, 30.0, 45.0]
    assert checks == [10.0, 20.0, 30.0, 40.0]
    assert all(wait > 0 for wait in waits)
