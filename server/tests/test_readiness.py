"""Readiness (`/readyz`, thinwire.readiness): a store that answers reads but refuses
writes — a full disk, Redis out of memory or made read-only — takes the replica out, and
a probe of a write brings it back once writes land again, with no user's send."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from conftest import FullDisk, app_for, send
from thinwire import MemoryStore, SQLiteStore, readiness
from thinwire.demo import DemoAgent
from thinwire.errors import StoreError, VersionConflict
from thinwire.readiness import PROBE_INTERVAL, Writes
from thinwire.testing import redis_server_binary, serve_redis
from thinwire.testing.server import free_port


def demo() -> DemoAgent:
    return DemoAgent(delay=0)


def refusal() -> StoreError:
    return StoreError("the store is unavailable; try again shortly")


def unready(response: Any) -> bool:
    """The readiness check's 503, as a balancer sees it."""
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    return bool(response.json()["error"]["code"] == "store_unavailable")


def send_again(client: TestClient, context_id: str) -> Any:
    body = {"message": {"text": "again"}, "contextId": context_id}
    return client.post("/agents/demo/runs", json=body)


def test_readyz_answers_503_while_the_disk_is_full_and_200_once_writes_land(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads work on a full disk: readiness must not rest on one."""
    monkeypatch.setattr(readiness, "PROBE_INTERVAL", 0.0)  # each check may probe
    store = SQLiteStore(tmp_path / "t.db")
    disk = FullDisk(store)
    with TestClient(app_for({"demo": demo}, store=store)) as client:
        context_id = send(client, "hello")[0]["contextId"]
        assert client.get("/readyz").json() == {"ok": True}
        disk.full = True
        # Nothing refused yet: the check reads, and tries no write while none failed.
        assert client.get("/readyz").status_code == 200 and disk.refused == 0
        refused = send_again(client, context_id)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "store_unavailable"
        assert client.get(f"/agents/demo/contexts/{context_id}").status_code == 200
        assert unready(client.get("/readyz"))
        assert disk.refused == 2  # the send's save, then the check's probe
        disk.full = False
        # No send: the next check's probe lands, and the replica is back.
        assert client.get("/readyz").json() == {"ok": True}
        disk.full = True
        assert send_again(client, context_id).status_code == 503
        disk.full = False
        assert send_again(client, context_id).status_code == 200
        writes = client.app.state.thinwire.contexts.writes  # type: ignore[attr-defined]
        assert not writes.refused  # the save that landed cleared it, before any check


class Probed(MemoryStore):
    """A store whose probes are counted, refused on demand and held at `gate`."""

    def __init__(self) -> None:
        super().__init__()
        self.probes = 0
        self.refusing = True
        self.gate: asyncio.Event | None = None

    async def probe_write(self) -> None:
        self.probes += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.refusing:
            raise refusal()
        await super().probe_write()


@pytest.mark.anyio
async def test_a_balancer_asking_often_gets_a_probe_at_a_time_and_one_a_second() -> None:
    now = [0.0]
    writes, store = Writes(clock=lambda: now[0]), Probed()
    await writes.check(store)
    assert store.probes == 0  # nothing refused: nothing to probe
    writes.failed(refusal())
    store.gate = asyncio.Event()
    first = asyncio.create_task(writes.check(store))
    while store.probes == 0:
        await asyncio.sleep(0)
    now[0] += 2 * PROBE_INTERVAL  # one is due by the clock, but one goes already:
    for _ in range(3):  # the other checks are answered at once, as things stand
        with pytest.raises(StoreError):
            await writes.check(store)
    assert store.probes == 1
    store.gate.set()
    with pytest.raises(StoreError):
        await first  # refused again
    store.gate = None
    with pytest.raises(StoreError):
        await writes.check(store)  # due by the clock: a probe, refused
    assert store.probes == 2
    now[0] += PROBE_INTERVAL / 2
    for _ in range(3):
        with pytest.raises(StoreError):
            await writes.check(store)  # not due
    assert store.probes == 2
    now[0] += PROBE_INTERVAL / 2
    store.refusing = False
    await writes.check(store)  # due: probed, and it landed
    assert store.probes == 3 and not writes.refused
    await writes.check(store)
    assert store.probes == 3


class Hanging(Probed):
    """A store that stops answering on demand, as a Redis stopped with SIGSTOP or cut off
    by a partition does: its reads and its probes wait for `gate`, which is never set."""

    def __init__(self) -> None:
        super().__init__()
        self.refusing = False
        self.hangs = False

    async def version(self, context_id: str) -> int | None:
        if self.hangs:
            await asyncio.Event().wait()
        return await super().version(context_id)


@pytest.mark.parametrize("what", ["read", "probe"])
def test_readyz_answers_503_within_its_timeout_when_the_store_hangs(
    what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not after the driver's own timeout (redis-py's 10 s, tried twice)."""
    monkeypatch.setattr(readiness, "CHECK_TIMEOUT", 0.05)
    monkeypatch.setattr(readiness, "PROBE_INTERVAL", 0.0)
    store = Hanging()
    with TestClient(app_for({"demo": demo}, store=store)) as client:
        writes = client.app.state.thinwire.contexts.writes  # type: ignore[attr-defined]
        if what == "read":
            store.hangs = True
        else:  # a write was refused, and the probe that would say it lands again hangs
            writes.failed(refusal())
            store.gate = asyncio.Event()
        for _ in range(2):  # a check cut short leaves no probe behind it that blocks the next
            hung = client.get("/readyz")
            assert unready(hung)
            assert hung.json()["error"]["message"] == (
                "the store did not answer within 0.05 s; try again shortly"
            )
        store.hangs, store.gate = False, None
        assert client.get("/readyz").json() == {"ok": True}
    assert store.probes == (3 if what == "probe" else 0)


def test_only_a_refusal_marks_the_store_and_a_write_that_began_before_it_does_not_clear_it() -> (
    None
):
    writes = Writes()
    with pytest.raises(VersionConflict), writes.watching():
        raise VersionConflict("ctx-1", 1, 2)  # the store answered
    with pytest.raises(RuntimeError), writes.watching():
        raise RuntimeError("a bug, not the store")
    assert not writes.refused
    with pytest.raises(StoreError), writes.watching():
        raise refusal()
    assert writes.refused
    with writes.watching(clears=False):  # a write that does not show the store takes them
        pass
    assert writes.refused
    with writes.watching():  # it began before the next refusal, and landed after it
        writes.failed(refusal())
    assert writes.refused
    with writes.watching():
        pass
    assert not writes.refused


@pytest.mark.anyio
async def test_every_store_probes_with_a_write_it_takes_back(tmp_path: Path) -> None:
    for store in (MemoryStore(), SQLiteStore(tmp_path / "t.db")):
        await store.probe_write()
        await store.probe_write()
        assert await store.read_events(readiness_probe()) == []
        await store.close()
    sqlite = SQLiteStore(tmp_path / "full.db")
    FullDisk(sqlite).full = True
    with pytest.raises(StoreError):
        await sqlite.probe_write()
    await sqlite.close()


def readiness_probe() -> str:
    from thinwire.stores.base import PROBE_CONTEXT

    return PROBE_CONTEXT


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.skipif(redis_server_binary() is None, reason="no redis-server here")
def test_readyz_answers_503_while_redis_refuses_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Out of memory (`noeviction`) or made a read-only replica, Redis still answers
    reads; a Redis of the test's own, as both settings are the whole server's."""
    import redis

    from thinwire.stores.redis import RedisStore

    monkeypatch.setattr(readiness, "PROBE_INTERVAL", 0.0)
    with serve_redis() as url:
        control = redis.Redis.from_url(url)
        refuse_and_allow = [
            (
                lambda: control.config_set("maxmemory", 1),
                lambda: control.config_set("maxmemory", 0),
            ),
            (
                lambda: control.replicaof("127.0.0.1", free_port()),
                lambda: control.replicaof("NO", "ONE"),
            ),
        ]
        store = RedisStore.from_url(url, prefix=f"ready-{secrets.token_hex(4)}")
        with TestClient(app_for({"demo": demo}, store=store)) as client:
            context_id = send(client, "hello")[0]["contextId"]
            for refuse, allow in refuse_and_allow:
                refuse()
                refused = send_again(client, context_id)
                assert refused.status_code == 503, refused.text
                assert client.get(f"/agents/demo/contexts/{context_id}").status_code == 200
                assert unready(client.get("/readyz"))
                allow()
                assert client.get("/readyz").json() == {"ok": True}
                assert send_again(client, context_id).status_code == 200
        control.close()
