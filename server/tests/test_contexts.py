"""Live contexts: an LRU over the store, restore, killed runs, clear and forget."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.requests import HTTPConnection
from starlette.testclient import TestClient

from conftest import app_for, assert_no_canary, parse_sse, said, send, server_context
from thinwire import Agent, MemoryStore, Run, SQLiteStore
from thinwire.contexts import ContextRegistry, new_record
from thinwire.demo import DemoAgent
from thinwire.records import SEQ_LEASE, public_turn
from thinwire.runner import begin_run, execute
from thinwire.stores import AuditEntry, ContextRecord


def test_evicted_context_is_restored_indistinguishably() -> None:
    store = MemoryStore()
    with TestClient(app_for({"demo": DemoAgent}, store=store, max_contexts=2)) as client:
        first = send(client, "remember me")
        context_id = first[0]["contextId"]
        for text in ("two", "three", "four"):
            send(client, text)
        registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
        assert len(registry) == 2 and context_id not in registry._live
        again = send(client, "do you?", context_id)
        assert server_context(client, context_id).state["messages_seen"] == 2
    assert "Earlier you told me “remember me”" in again[-1]["text"]
    assert again[0]["seq"] == first[-1]["seq"] + 1


@pytest.mark.anyio
async def test_concurrent_loads_share_one_live_context() -> None:
    store = MemoryStore()
    await store.create(new_record("ctx-a", "demo", DemoAgent(), "ada"))
    registry = ContextRegistry(store, {"demo": DemoAgent})
    contexts = await asyncio.gather(*(registry.get("demo", "ctx-a", "ada") for _ in range(5)))
    assert all(context is contexts[0] for context in contexts)


@pytest.mark.anyio
async def test_a_killed_run_is_recorded_as_interrupted_on_next_load() -> None:
    store = MemoryStore()
    await store.create(new_record("ctx-a", "demo", DemoAgent(), "ada"))
    first = ContextRegistry(store, {"demo": DemoAgent})
    context = await first.get("demo", "ctx-a", "ada")
    log = await begin_run(first, context, "hello")
    log.run_start("demo", *context.record.next_turn_ids())
    log.token("half a rep")  # ...and the process dies here: nothing more is saved.

    restarted = ContextRegistry(store, {"demo": DemoAgent})
    recovered = await restarted.get("demo", "ctx-a", "ada")
    assert said(recovered.transcript) == [
        {"role": "user", "text": "hello", "toolCalls": [], "stopReason": None},
        {"role": "assistant", "text": "", "toolCalls": [], "stopReason": "interrupted"},
    ]
    assert recovered.record.active_run is None
    # No seq that a client may have seen is ever used again.
    assert recovered.record.last_seq >= SEQ_LEASE > log.seqs[-1]
    stored = await store.load_whole("ctx-a")
    assert (
        stored is not None
        and stored.active_run is None
        and stored.transcript == recovered.transcript
    )


@pytest.mark.anyio
async def test_a_killed_run_keeps_the_reply_its_flushed_frames_showed() -> None:
    store = MemoryStore()
    await store.create(new_record("ctx-a", "demo", DemoAgent(), "ada"))
    first = ContextRegistry(store, {"demo": DemoAgent})
    context = await first.get("demo", "ctx-a", "ada")
    log = await begin_run(first, context, "hello")
    log.run_start("demo", *context.record.next_turn_ids())
    log.thinking("Counting, ")
    log.thinking("then charging.")
    counted = log.new_call_id()
    log.tool_call(counted, "count_words")
    log.tool_result(counted, "count_words", ok=True)
    log.tool_call(log.new_call_id(), "charge_card")
    log.token("half ")
    log.token("a reply")
    await log.flush(store)  # the client saw these...
    log.token(" never flushed")  # ...and the process dies before this one is stored.

    restarted = ContextRegistry(store, {"demo": DemoAgent})
    recovered = await restarted.get("demo", "ctx-a", "ada")
    assert said(recovered.transcript)[-1] == {
        "role": "assistant",
        "text": "half a reply",
        "toolCalls": ["count_words", "charge_card"],
        "stopReason": "interrupted",
    }
    # What the run recorded of its tools was never saved: its history message still names
    # them, and how they ended as far as the client was shown, for a model to read.
    assert recovered.transcript[-1]["thinking"] == "Counting, then charging."
    assert [(a["name"], a["ok"]) for a in recovered.transcript[-1]["activity"]] == [
        ("count_words", True),
        ("charge_card", None),
    ]
    assert recovered.history[-1]["content"] == "half a reply"
    assert recovered.history[-1]["calls"] == [
        {"name": "count_words", "ok": True},
        {"name": "charge_card", "ok": None},
    ]
    done = json.loads((await store.read_events("ctx-a"))[-1].data)
    assert (done["type"], done["text"], done["stopReason"]) == (
        "done",
        "half a reply",
        "interrupted",
    )


class Asker(Agent):
    """Looks something up, notes it and says so, then asks; answered, says more."""

    async def look(self) -> str:
        return "found"

    async def run(self, run: Run, text: str) -> None:
        await run.tool("look", self.look)
        run.state["noted"] = "looked"
        await run.say("asking. ")
        await run.interrupt("Go on?", options=["yes"])
        await run.say("going on")


@pytest.mark.anyio
async def test_a_killed_resumed_run_keeps_what_the_run_that_asked_did() -> None:
    """As a stop while it waited would: its tool step and reply in the history, its
    AgentState write, audited as that run's."""
    store = MemoryStore()
    await store.create(new_record("ctx-a", "asker", Asker(), "ada"))
    first = ContextRegistry(store, {"asker": Asker})
    context = await first.get("asker", "ctx-a", "ada")
    asked = await begin_run(first, context, "go")
    await execute(first, context, asked, "go")
    assert context.record.checkpoint is not None
    interrupt_id = context.record.checkpoint.interrupt_id
    resumed = await begin_run(first, context, None, answering=interrupt_id)
    resumed.run_start("asker", *context.record.next_turn_ids())
    resumed.token("going")
    await resumed.flush(store)  # ...and the process dies here.

    restarted = ContextRegistry(store, {"asker": Asker})
    recovered = await restarted.get("asker", "ctx-a", "ada")
    assert [m["role"] for m in recovered.history] == ["user", "tool", "assistant"]
    assert recovered.history[-1] == {
        "role": "assistant",
        "content": "asking. going",
        "stopReason": "interrupted",
    }
    assert dict(recovered.state) == {"noted": "looked"}
    [write] = [entry for entry in await store.audit("ctx-a") if entry.key == "noted"]
    assert (write.value, write.run_id) == ("looked", asked.run_id)
    assert [t["text"] for t in said(recovered.transcript)] == ["go", "asking. ", "going"]


@pytest.mark.anyio
async def test_a_read_does_not_fail_when_recording_a_killed_run_fails() -> None:
    """The store refuses the save that would record the interruption (a full disk): the
    conversation is still read, and recorded once the store takes writes again."""
    from thinwire.errors import StoreError

    class Refusing(MemoryStore):
        refuse = False

        async def save(self, record: ContextRecord, **kwargs: Any) -> int:
            if self.refuse:
                raise StoreError("the store is unavailable; try again shortly")
            return await super().save(record, **kwargs)

    store = Refusing()
    await store.create(new_record("ctx-a", "demo", DemoAgent(), "ada"))
    first = ContextRegistry(store, {"demo": DemoAgent})
    await begin_run(first, await first.get("demo", "ctx-a", "ada"), "hello")  # …then killed
    store.refuse = True
    restarted = ContextRegistry(store, {"demo": DemoAgent})
    read = await restarted.get("demo", "ctx-a", "ada")
    assert read.transcript[0]["text"] == "hello"
    stored = await store.load("ctx-a")
    assert stored is not None and stored.active_run is not None  # not recorded yet
    store.refuse = False
    again = await restarted.get("demo", "ctx-a", "ada")  # not cached: loaded afresh
    assert again is not read and again.record.active_run is None
    assert again.transcript[-1]["stopReason"] == "interrupted"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Busy(Agent):
    release = asyncio.Event()

    async def run(self, run: Run, text: str) -> None:
        await run.say("working")
        await type(self).release.wait()


def test_clear_drops_history_and_its_frames_but_keeps_state_and_id(client: TestClient) -> None:
    first = send(client, "forget this")
    context_id = first[0]["contextId"]
    events = f"/agents/demo/contexts/{context_id}/events"
    assert "forget this" in client.get(events).text  # the last run's frames, till the clear
    cleared = client.post(f"/agents/demo/contexts/{context_id}/clear")
    assert cleared.status_code == 200
    assert cleared.json() == {
        "contextId": context_id,
        "agent": "demo",
        "title": None,  # it was the start of the message the clear dropped
        "turns": [],
        "activeRunId": None,
        "pendingInterrupt": None,
        "hasEarlier": False,
    }
    assert client.get(events).status_code == 204  # nothing of the reply to replay
    context = server_context(client, context_id)
    assert [m["role"] for m in context.history] == ["system"]
    assert context.state["messages_seen"] == 1
    after = send(client, "fresh start", context_id)
    assert after[0]["contextId"] == context_id
    assert "start of our conversation" in after[-1]["text"]
    assert after[0]["seq"] > first[-1]["seq"]
    assert "forget this" not in client.get(events).text
    listed = client.get("/agents/demo/contexts").json()["conversations"]
    assert [c["title"] for c in listed] == ["fresh start"]


def test_clear_keeps_a_title_someone_gave(client: TestClient) -> None:
    context_id = send(client, "first words")[0]["contextId"]
    base = f"/agents/demo/contexts/{context_id}"
    assert client.patch(base, json={"title": "Trip"}).status_code == 200
    assert client.post(f"{base}/clear").json()["title"] == "Trip"


def test_forget_removes_every_trace() -> None:
    store = MemoryStore()
    with TestClient(app_for({"demo": DemoAgent}, store=store)) as client:
        context_id = send(client, "delete me")[0]["contextId"]
        assert client.delete(f"/agents/demo/contexts/{context_id}").status_code == 204
        assert client.get(f"/agents/demo/contexts/{context_id}").status_code == 404
        body = {"contextId": context_id, "message": {"text": "hi"}}
        assert client.post("/agents/demo/runs", json=body).status_code == 404
        assert client.delete(f"/agents/demo/contexts/{context_id}").status_code == 404
        assert client.portal is not None
        assert client.portal.call(store.load, context_id) is None
        assert client.portal.call(store.audit, context_id) == []


def secret(where: str) -> str:
    """A marker in nothing but the one place of a conversation it names."""
    return f"zq-{where}-8d41"


#: What a clear keeps: the system prompt, AgentState and its audit trail.
KEPT_BY_CLEAR = ("prompt", "seed", "state")


class Confidant(Agent):
    """Puts a marker everywhere a conversation keeps bytes: its system prompt, its
    AgentState and audit trail, a tool's arguments and output, its reply and frames."""

    system_prompt = f"Keep {secret('prompt')} to yourself."
    initial_state: ClassVar[dict[str, Any]] = {"seed": secret("seed")}

    async def run(self, run: Run, text: str) -> None:
        run.state["note"] = secret("state")

        async def look(query: str) -> dict[str, str]:
            return {"found": secret("output")}

        await run.tool("look", look, query=secret("arguments"))
        await run.say(secret("reply"))


def sqlite_bytes(path: Path) -> bytes:
    """The raw bytes of the database file, its WAL and its WAL index, as they are now."""
    files = [path, *(path.with_name(path.name + tail) for tail in ("-wal", "-shm"))]
    return b"".join(file.read_bytes() for file in files if file.exists())


@pytest.mark.parametrize("verb", ["forget", "clear"])
def test_forget_and_clear_leave_no_byte_of_the_conversation_in_the_sqlite_files(
    tmp_path: Path, verb: str
) -> None:
    """Neither in the file (deleted rows are zeroed, whatever SQLite's build) nor in the
    WAL (which keeps old page images until it is truncated), read while the server runs."""
    path = tmp_path / "thinwire.sqlite3"
    places = ["user", "arguments", "output", "reply", *KEPT_BY_CLEAR]
    with TestClient(app_for({"demo": Confidant}, store=SQLiteStore(path))) as client:
        context_id = send(client, secret("user"))[0]["contextId"]
        send(client, "and again", context_id)
        held = sqlite_bytes(path)
        assert [p for p in places if secret(p).encode() not in held] == []
        base = f"/agents/demo/contexts/{context_id}"
        if verb == "forget":
            assert client.delete(base).status_code == 204
            gone = places
        else:
            assert client.post(f"{base}/clear").status_code == 200
            gone = [p for p in places if p not in KEPT_BY_CLEAR]
        left = sqlite_bytes(path)
        assert [p for p in gone if secret(p).encode() in left] == []


def test_clear_and_forget_wait_for_the_run() -> None:
    Busy.release = asyncio.Event()
    with TestClient(app_for({"demo": Busy})) as client:
        with client.stream("POST", "/agents/demo/runs", json={"message": {"text": "a"}}) as stream:
            lines = stream.iter_lines()
            context_id = parse_sse("\n".join(iter(lambda: next(lines), "")))[0]["contextId"]
            base = f"/agents/demo/contexts/{context_id}"
            for response in (client.post(f"{base}/clear"), client.delete(base)):
                assert response.status_code == 409
                assert response.json()["error"]["code"] == "context_busy"
            assert client.portal is not None
            client.portal.call(Busy.release.set)
            assert "done" in "\n".join(lines)
        assert client.delete(base).status_code == 204


def by_header(connection: HTTPConnection) -> str | None:
    return connection.headers.get("x-user")


def test_a_cold_read_is_answered_from_the_stored_transcript(tmp_path: Path) -> None:
    """A conversation this process does not hold is read back without being restored,
    and the answer is the one the live context gives, pending interrupt and all."""
    path = tmp_path / "t.db"
    ada = {"x-user": "ada"}

    def app() -> Any:
        agents = {"demo": lambda: DemoAgent(delay=0, ledger=tmp_path / "ledger.log")}
        return app_for(agents, store=SQLiteStore(path), identify=by_header)

    with TestClient(app()) as client:
        first = parse_sse(
            client.post("/agents/demo/runs", json=run_body("hello"), headers=ada).text
        )
        context_id = first[0]["contextId"]
        asked = client.post("/agents/demo/runs", json=run_body("refund", context_id), headers=ada)
        assert parse_sse(asked.text)[-2]["type"] == "interrupt"
        live = client.get(f"/agents/demo/contexts/{context_id}", headers=ada)
    assert live.status_code == 200 and live.json()["pendingInterrupt"] is not None

    with TestClient(app()) as client:
        registry = client.app.state.thinwire.contexts  # type: ignore[attr-defined]
        cold = client.get(f"/agents/demo/contexts/{context_id}", headers=ada)
        assert cold.status_code == 200 and cold.json() == live.json()
        assert cold.headers["content-type"] == "application/json"
        assert len(registry) == 0  # read, not restored
        for headers, agent in (({"x-user": "eve"}, "demo"), (ada, "other")):
            probe = client.get(f"/agents/{agent}/contexts/{context_id}", headers=headers)
            assert probe.status_code == 404, probe.text
        assert_no_canary(cold.text)


def run_body(text: str, context_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"message": {"text": text}}
    if context_id is not None:
        body["contextId"] = context_id
    return body


CONTEXT_ID = "ctx-" + "a" * 36


@pytest.mark.anyio
async def test_a_cold_read_of_a_killed_run_records_it_first(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    await store.create(new_record(CONTEXT_ID, "demo", DemoAgent(), "ada"))
    first = ContextRegistry(store, {"demo": DemoAgent})
    context = await first.get("demo", CONTEXT_ID, "ada")
    log = await begin_run(first, context, "hello")
    log.run_start("demo", *context.record.next_turn_ids())  # ...and the process dies here.

    server = app_for({"demo": DemoAgent}, store=store).state.thinwire
    body = json.loads(await server.read_transcript("demo", CONTEXT_ID, "ada"))
    assert [turn["stopReason"] for turn in body["turns"]] == [None, "interrupted"]
    assert body["activeRunId"] is None
    await store.close()


class CountingStore(MemoryStore):
    """A memory store that records which writes it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        self.writes.append("create")
        await super().create(record, audit)

    async def save(self, record: ContextRecord, **options: Any) -> int:
        self.writes.append("save")
        return await super().save(record, **options)


@pytest.mark.anyio
async def test_a_new_conversation_is_stored_with_its_first_message_in_one_write() -> None:
    store = CountingStore()
    registry = ContextRegistry(store, {"demo": DemoAgent})
    context = registry.create("demo", "ada")
    assert await store.load(context.id) is None and len(registry) == 0  # not stored yet
    await begin_run(registry, context, "hello")
    assert store.writes == ["create"]
    stored = await store.load(context.id)
    assert stored is not None and stored.version == 1 and stored.active_run is not None
    await store.load_branch(stored)
    assert stored.transcript == context.record.transcript
    assert said(stored.transcript) == said([public_turn("user", "hello")])
    audit = [(e.key, e.source) for e in await store.audit(context.id)]
    assert audit == [("secret", "system"), ("messages_seen", "system")]
    assert registry.cached(context.id) is context


@pytest.mark.anyio
async def test_a_new_conversation_whose_first_write_fails_is_nowhere() -> None:
    store = CountingStore()

    async def full(record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        raise OSError("disk full")

    store.create = full  # type: ignore[method-assign]
    registry = ContextRegistry(store, {"demo": DemoAgent})
    context = registry.create("demo", "ada")
    with pytest.raises(OSError):
        await begin_run(registry, context, "hello")
    assert registry.cached(context.id) is None and context.holder is None
    assert await store.load(context.id) is None


@pytest.mark.anyio
async def test_a_context_at_rest_holds_its_conversation_as_text(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    registry = ContextRegistry(store, {"demo": lambda: DemoAgent(delay=0)})
    context = registry.create("demo", "ada")
    log = await begin_run(registry, context, "hello")
    assert not at_rest(context.record)  # the run uses its history
    await execute(registry, context, log, "hello")
    assert at_rest(context.record) and log.finished
    restarted = ContextRegistry(store, {"demo": DemoAgent})
    restored = await restarted.get("demo", context.id, "ada")
    assert at_rest(restored.record)  # restored without decoding anything
    assert [turn["role"] for turn in restored.transcript] == ["user", "assistant"]
    await store.close()


def at_rest(record: ContextRecord) -> bool:
    """Every exchange in hand is held as its JSON text, nothing decoded."""
    return all(e._messages is None and e._turns is None for e in record.exchanges.values())


class Gated(Agent):
    """Says a word; on "long", waits to be let go (or stopped) before saying more."""

    gate: ClassVar[asyncio.Event]

    async def run(self, run: Run, text: str) -> None:
        await run.say("begun. ")
        if text == "long":
            await type(self).gate.wait()
        await run.say("ended.")


def test_a_conversation_loaded_while_every_other_runs_is_one_copy_to_every_request() -> None:
    """With as many conversations running as the cache holds, one loaded to run was
    dropped from the cache at once: the next request loaded a second copy, whose run
    went on beside the first (which ended interrupted), and a stop reached the copy that
    was not running."""
    Gated.gate = asyncio.Event()
    with TestClient(app_for({"demo": Gated}, max_contexts=1)) as client:
        a = send(client, "hi")[0]["contextId"]
        b = send(client, "hi")[0]["contextId"]
        long_b = {"contextId": b, "message": {"text": "long"}}
        long_a = {"contextId": a, "message": {"text": "long"}}
        with (
            client.stream("POST", "/agents/demo/runs", json=long_b) as on_b,
            client.stream("POST", "/agents/demo/runs", json=long_a) as on_a,
        ):
            b_lines, a_lines = on_b.iter_lines(), on_a.iter_lines()
            for lines in (b_lines, a_lines):
                assert "run_start" in "\n".join(iter(lambda: next(lines), ""))  # noqa: B023
            again = client.post("/agents/demo/runs", json={**long_a, "message": {"text": "x"}})
            assert again.status_code == 409 and again.json()["error"]["code"] == "context_busy"
            stop = client.post(f"/agents/demo/contexts/{a}/stop", json={})
            assert stop.json()["stopping"] is True
            a_frames = parse_sse("\n".join(a_lines))
            assert client.portal is not None
            client.portal.call(Gated.gate.set)
            b_frames = parse_sse("\n".join(b_lines))
        assert a_frames[-1]["stopReason"] == "stopped"
        assert b_frames[-1]["stopReason"] == "end"
        turns = client.get(f"/agents/demo/contexts/{a}").json()["turns"]
        assert [(t["role"], t["stopReason"]) for t in turns] == [
            ("user", None),
            ("assistant", "end"),
            ("user", None),
            ("assistant", "stopped"),
        ]


@pytest.mark.anyio
async def test_a_copy_evicted_while_its_caller_waited_is_held_only_if_no_other_is_live() -> None:
    from thinwire.errors import Conflict

    store = MemoryStore()
    await store.create(new_record("ctx-a", "demo", DemoAgent(), "ada"))
    registry = ContextRegistry(store, {"demo": DemoAgent})
    first = await registry.get("demo", "ctx-a", "ada")
    registry.forget_cached(first)  # evicted, as while its caller awaited a refresh
    await registry.acquire(first, "run")  # nobody loaded another: held, and live again
    assert registry.cached("ctx-a") is first
    await registry.release(first)
    registry.forget_cached(first)
    second = await registry.get("demo", "ctx-a", "ada")  # another request loads a copy
    assert second is not first
    with pytest.raises(Conflict, match="busy"):
        await registry.acquire(first, "run")
    await registry.acquire(second, "run")
    await registry.release(second)
