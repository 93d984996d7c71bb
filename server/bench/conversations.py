"""Long conversations: what a send costs in a conversation of 10, 1,000 and 5,000 turns,
cold (not in the server's memory) and hot, a cold read of its transcript, and the server's
memory with 1,000 live conversations of 1,000 turns.

Everything measured goes through the public HTTP API, and the servers are configured
only through `create_app`'s options (`max_contexts`; the live-context cache's byte bound
is left at its default):

1. Build: each conversation is made by sends (the `scribe` agent: a user message of ~120
   characters, a reply of ~430, so 1,000 turns are ~640 KB of JSON).
2. Cold and hot, on a fresh server with `max_contexts=1`: the measured sends go round the
   sizes, so each finds its conversation evicted by the send before (cold); then sends
   in a row to one conversation (hot: it stays cached). A 10-turn conversation would
   grow by the sends themselves, so there are enough of them to send each a few times
   only. Each send: the time to its first delta and to its end, and the server's CPU
   (the scheduler's account, to the nanosecond). A cold `GET` of each transcript's
   latest page, round the sizes the same way, is the cold resume (what `useAgent` reads
   when it opens a conversation: `RESUME_PAGE` exchanges); a cold `GET` of the whole
   transcript is measured beside it.
3. Live: 1,000 conversations of 1,000 turns on a fresh server with the default cache, one
   send each; the server's RSS before and after, beside the cache's byte bound. Building
   them by sends would take ~500,000 runs, so the 1,000-turn conversation of step 1 is
   copied through the `Store` interface (`load`, then `create` under a new id) while no
   server runs, and every copy is checked over HTTP before it counts.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.procs import Server, free_port, python_server, started
from bench.servers import USER_TEXT
from bench.stats import median, percentile
from thinwire.contexts import DEFAULT_CACHE_BYTES
from thinwire.ids import new_context_id
from thinwire.stores import SQLiteStore

__all__ = ["ConversationPlan", "run_conversations"]

#: The agent of the measured sends (reads its latest 50 messages, as ChatAgent does) and
#: of the live conversations (reads them whole: what the cache's byte bound is for).
AGENT = "scribe"
WHOLE = "scribe-whole"
#: Exchanges of the page a UI resuming a conversation reads: the hook's default `pageSize`.
RESUME_PAGE = 50
CONTEXT_ID = re.compile(rb'"contextId":"(ctx-[0-9a-f]{36})"')


@dataclass(frozen=True)
class ConversationPlan:
    sizes: tuple[int, ...] = (10, 1000, 5000)
    #: Measured sends per size, cold and hot each; cold reads per size (of each kind: a
    #: p99 of fewer than 100 is the worst read, not a percentile).
    sends: int = 20
    reads: int = 100
    #: Live conversations for the memory figure, and their turns.
    live: int = 1000
    live_turns: int = 1000
    #: A conversation may grow by at most this fraction through the measured sends.
    growth: float = 0.1


@dataclass
class Sent:
    first_delta: float
    total: float
    cpu: float


async def send(port: int, context_id: str | None, agent: str = AGENT) -> tuple[str, float, float]:
    """POST a run (on a connection of its own); its context id, the seconds to its first
    delta and to its end."""
    body: dict[str, Any] = {"message": {"text": USER_TEXT}}
    if context_id is not None:
        body["contextId"] = context_id
    payload = json.dumps(body)
    began = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**22)
    first = 0.0
    received = b""
    try:
        writer.write(
            (
                f"POST /agents/{agent}/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                f"Content-Length: {len(payload.encode())}\r\nConnection: close\r\n\r\n{payload}"
            ).encode()
        )
        while chunk := await reader.read(65536):
            received += chunk
            if not first and b'"type":"token"' in received:
                first = time.perf_counter()
    finally:
        writer.close()
    total = time.perf_counter() - began
    found = CONTEXT_ID.search(received)
    if b" 200 " not in received.split(b"\r\n", 1)[0] or b'"stopReason":"end"' not in received:
        raise RuntimeError(f"send to {context_id}: {received[:300]!r}")
    assert found is not None
    return found.group(1).decode(), (first or time.perf_counter()) - began, total


async def build(port: int, turns: int, agent: str = AGENT) -> str:
    """A conversation of `turns` turns (two per send), made by sends."""
    context_id, _, _ = await send(port, None, agent)
    for _ in range(turns // 2 - 1):
        await send(port, context_id, agent)
    return context_id


async def build_all(
    port: int, wanted: dict[int, int], whole: int | None = None
) -> tuple[dict[int, list[str]], str | None]:
    """`wanted`: turns -> how many conversations of that many turns; and one of `whole`
    turns for the agent that reads it whole."""
    jobs = [(turns, build(port, turns)) for turns, count in wanted.items() for _ in range(count)]
    source = build(port, whole, WHOLE) if whole else None
    made = await asyncio.gather(*(job for _, job in jobs), *([source] if source else []))
    built: dict[int, list[str]] = {turns: [] for turns in wanted}
    for (turns, _), context_id in zip(jobs, made[: len(jobs)], strict=True):
        built[turns].append(context_id)
    return built, (made[-1] if source else None)


async def get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**26)
    try:
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
        )
        response = await reader.read()
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in head.lower():
        body = dechunk(body)
    return int(head.split(b" ", 2)[1]), body


def dechunk(raw: bytes) -> bytes:
    out, position = [], 0
    while True:
        end = raw.index(b"\r\n", position)
        size = int(raw[position:end], 16)
        if size == 0:
            return b"".join(out)
        out.append(raw[end + 2 : end + 2 + size])
        position = end + 2 + size + 2


async def turns_of(port: int, context_id: str, agent: str = AGENT) -> int:
    status, body = await get(port, f"/agents/{agent}/contexts/{context_id}")
    if status != 200:
        raise RuntimeError(f"GET {context_id}: {status} {body[:200]!r}")
    return len(json.loads(body)["turns"])


async def timed_read(port: int, context_id: str, turns: int, page: int | None = None) -> float:
    """The seconds a `GET` of the transcript takes: whole, or its last `page` exchanges."""
    query = "" if page is None else f"?limit={page}"
    began = time.perf_counter()
    status, body = await get(port, f"/agents/{AGENT}/contexts/{context_id}{query}")
    elapsed = time.perf_counter() - began
    expected = turns if page is None else min(turns, 2 * page)
    if status != 200 or len(json.loads(body)["turns"]) < expected:
        raise RuntimeError(f"GET {context_id}{query}: {status} {body[:200]!r}")
    return elapsed


async def measured_send(port: int, server: Server, context_id: str) -> Sent:
    cpu = server.cpu_fine()
    _, first, total = await send(port, context_id)
    return Sent(first, total, server.cpu_fine() - cpu)


async def cold_and_hot(
    port: int, server: Server, built: dict[int, list[str]], plan: ConversationPlan
) -> dict[int, dict[str, Any]]:
    sizes = list(built)
    reads: dict[int, list[float]] = {turns: [] for turns in sizes}
    resumes: dict[int, list[float]] = {turns: [] for turns in sizes}
    for i in range(plan.reads):  # round the sizes: each read finds its conversation cold
        for turns in sizes:
            ids = built[turns]
            resumes[turns].append(await timed_read(port, ids[i % len(ids)], turns, RESUME_PAGE))
            reads[turns].append(await timed_read(port, ids[i % len(ids)], turns))
    cold: dict[int, list[Sent]] = {turns: [] for turns in sizes}
    for i in range(plan.sends):
        for turns in sizes:
            ids = built[turns]
            cold[turns].append(await measured_send(port, server, ids[i % len(ids)]))
    hot: dict[int, list[Sent]] = {turns: [] for turns in sizes}
    for turns in sizes:
        ids = built[turns]
        cached = None
        for i in range(plan.sends):
            context_id = ids[i % len(ids)]
            if context_id != cached:
                await send(port, context_id)  # it is cached from here on
                cached = context_id
            hot[turns].append(await measured_send(port, server, context_id))
    figures: dict[int, dict[str, Any]] = {}
    for turns in sizes:
        figures[turns] = {
            "conversations": len(built[turns]),
            "resume_page": RESUME_PAGE,
            "resume_p50_ms": percentile(resumes[turns], 0.5) * 1e3,
            "resume_p99_ms": percentile(resumes[turns], 0.99) * 1e3,
            "read_p50_ms": percentile(reads[turns], 0.5) * 1e3,
            "read_p99_ms": percentile(reads[turns], 0.99) * 1e3,
        }
        for name, sent in (("cold", cold[turns]), ("hot", hot[turns])):
            figures[turns][name] = {
                "sends": len(sent),
                "cpu_ms": median(s.cpu for s in sent) * 1e3,
                "cpu_mean_ms": sum(s.cpu for s in sent) / len(sent) * 1e3,
                "first_delta_p50_ms": percentile([s.first_delta for s in sent], 0.5) * 1e3,
                "first_delta_p99_ms": percentile([s.first_delta for s in sent], 0.99) * 1e3,
                "total_p50_ms": percentile([s.total for s in sent], 0.5) * 1e3,
            }
    return figures


async def copy_conversation(data_dir: Path, source: str, copies: int) -> list[str]:
    """`copies` conversations like `source`, through the Store interface (see the module's
    docstring): the record loaded (with its exchanges, where the store keeps them apart),
    then created under a new id."""
    store = SQLiteStore.in_directory(data_dir)
    made = []
    try:
        for _ in range(copies):
            record = await store.load(source)
            if record is None:
                raise RuntimeError(f"{source} is not in the store")
            missing = getattr(record, "missing", None)
            if callable(missing) and missing():
                record.hold(await store.load_exchanges(source, missing()))  # type: ignore[attr-defined]
            record.id = new_context_id()
            record.version = 0
            await store.create(record)
            made.append(record.id)
    finally:
        await store.close()
    return made


async def touch_all(port: int, ids: Sequence[str], agent: str, concurrency: int = 8) -> list[float]:
    """One send to each conversation, `concurrency` at a time; their first-delta times."""
    queue = list(ids)
    firsts: list[float] = []

    async def worker() -> None:
        while queue:
            _, first, _ = await send(port, queue.pop(), agent)
            firsts.append(first)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return firsts


def per_conversation(plan: ConversationPlan, turns: int) -> int:
    """Conversations of `turns` turns the measured sends need, so none grows by more than
    `plan.growth` (each send adds two turns; a cold and a hot send and a warm one)."""
    added = 2 * 3 * plan.sends
    return max(1, min(plan.sends, math.ceil(added / max(1.0, plan.growth * turns))))


def run_conversations(plan: ConversationPlan) -> dict[str, Any]:
    results: dict[str, Any] = {"sizes": {}, "live": None}
    with tempfile.TemporaryDirectory(prefix="thinwire-bench-") as directory:
        data_dir = Path(directory)
        wanted = {turns: per_conversation(plan, turns) for turns in plan.sizes}
        port = free_port()
        argv = python_server("thinwire", port, "--data-dir", str(data_dir))
        began = time.perf_counter()
        with started("thinwire", argv, port):
            whole = plan.live_turns if plan.live else None
            built, source = asyncio.run(build_all(port, wanted, whole))
        print(
            f"  built {sum(map(len, built.values()))} conversations by sends"
            f" in {time.perf_counter() - began:.0f} s",
            flush=True,
        )
        copies: list[str] = []
        if source is not None:
            copies = [source, *asyncio.run(copy_conversation(data_dir, source, plan.live - 1))]

        port = free_port()
        argv = python_server("thinwire", port, "--data-dir", str(data_dir), "--max-contexts", "1")
        with started("thinwire", argv, port) as server:
            asyncio.run(build_all(port, {10: 1}))  # warm: imports, the first runs
            figures = asyncio.run(
                cold_and_hot(port, server, {t: built[t] for t in plan.sizes}, plan)
            )
        for turns in plan.sizes:
            row = figures[turns]
            results["sizes"][turns] = row
            print(
                f"  {turns:>5} turns: send cold {row['cold']['cpu_ms']:6.2f} ms CPU,"
                f" first delta p50 {row['cold']['first_delta_p50_ms']:6.2f} ms;"
                f" hot {row['hot']['cpu_ms']:6.2f} ms CPU;"
                f" cold resume p99 {row['resume_p99_ms']:6.2f} ms,"
                f" whole read p99 {row['read_p99_ms']:6.2f} ms",
                flush=True,
            )

        if plan.live:
            results["live"] = live(data_dir, copies, plan)
    return results


def live(data_dir: Path, ids: list[str], plan: ConversationPlan) -> dict[str, Any]:
    """The server's memory with every conversation of `ids` live (one send each)."""
    port = free_port()
    argv = python_server("thinwire", port, "--data-dir", str(data_dir))
    with started("thinwire", argv, port) as server:

        async def scenario() -> dict[str, Any]:
            first = await turns_of(port, ids[1] if len(ids) > 1 else ids[0], WHOLE)
            last = await turns_of(port, ids[-1], WHOLE)
            if last != first or first < plan.live_turns:
                return {"error": f"the copies have {first} and {last} turns"}
            scratch, _, _ = await send(port, None, WHOLE)  # warm: imports, the first runs
            for _ in range(20):
                await send(port, scratch, WHOLE)
            await asyncio.sleep(0.5)
            before = server.rss()
            began = time.perf_counter()
            firsts = await touch_all(port, ids, WHOLE)
            elapsed = time.perf_counter() - began
            await asyncio.sleep(0.5)
            after = server.rss()
            return {
                "conversations": len(ids),
                "turns": first,
                "rss_before_mb": before / 2**20,
                "rss_after_mb": after / 2**20,
                "peak_rss_mb": server.peak_rss() / 2**20,
                "touch_s": elapsed,
                "first_delta_p50_ms": percentile(firsts, 0.5) * 1e3,
                "first_delta_p99_ms": percentile(firsts, 0.99) * 1e3,
            }

        row = asyncio.run(scenario())
    row["cache_bytes"] = DEFAULT_CACHE_BYTES
    if "error" not in row:
        print(
            f"  {row['conversations']} live conversations of {row['turns']} turns:"
            f" RSS {row['rss_before_mb']:.0f} -> {row['rss_after_mb']:.0f} MB"
            f" (cache bound: {DEFAULT_CACHE_BYTES / 2**20:.0f} MB)",
            flush=True,
        )
    else:
        print(f"  live conversations: {row['error']}", flush=True)
    return row
