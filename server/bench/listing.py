"""A user's list of conversations: a page of 50 when the user has 10,000 of them.

The conversations (a message and a reply each, most recent last) are written through
the `Store` interface into a fresh SQLite file while no server runs, then the thinwire
server is started over that file and the client pages through the whole list with the
cursors it is given, newest first, timing each page end to end over loopback HTTP. The
first page is read again between passes, as a sidebar refreshing after every run does.
Every page is checked: 50 conversations, each newer than the next, none seen twice.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.procs import free_port, python_server, started
from bench.stats import median, percentile
from thinwire.identity import ANONYMOUS
from thinwire.records import ContextRecord
from thinwire.stores import SQLiteStore

__all__ = ["ListingPlan", "run_listing"]

AGENT = "scribe"


@dataclass(frozen=True)
class ListingPlan:
    conversations: int = 10_000
    page: int = 50
    #: Times the whole list is paged through.
    passes: int = 3


async def fill(path: Path, plan: ListingPlan) -> None:
    store = SQLiteStore(path)
    for n in range(plan.conversations):
        record = ContextRecord(
            id=f"ctx-{n:036x}",
            agent=AGENT,
            owner=ANONYMOUS,
            created_at=1_700_000_000.0 + n,
            updated_at=1_700_000_000.0 + n,
        )
        record.start_run(f"run-{n}", f"Conversation number {n}: what was it about again?")
        record.end_turn("end", "It was about the weather, and then about lighthouses.")
        await store.create(record)
    await store.close()


def run_listing(plan: ListingPlan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="thinwire-bench-list-") as directory:
        data_dir = Path(directory)
        started_at = time.perf_counter()
        asyncio.run(fill(data_dir / "thinwire.sqlite3", plan))
        built = time.perf_counter() - started_at
        port = free_port()
        argv = python_server("thinwire", port, "--data-dir", str(data_dir))
        with started("thinwire", argv, port), httpx.Client(timeout=10) as client:
            url = f"http://127.0.0.1:{port}/agents/{AGENT}/contexts"
            times = [page_time(client, url, {"limit": plan.page})[0] for _ in range(20)]
            times.clear()  # warm-up: connections, caches
            for _ in range(plan.passes):
                times += page_through(client, url, plan)
    return {
        "conversations": plan.conversations,
        "page": plan.page,
        "pages": len(times),
        "build_s": built,
        "p50_ms": median(times) * 1000,
        "p99_ms": percentile(times, 0.99) * 1000,
    }


def page_through(client: httpx.Client, url: str, plan: ListingPlan) -> list[float]:
    times: list[float] = []
    seen: set[str] = set()
    query: dict[str, Any] = {"limit": plan.page}
    newest = float("inf")
    while True:
        elapsed, body = page_time(client, url, query)
        times.append(elapsed)
        conversations = body["conversations"]
        for summary in conversations:
            assert summary["updatedAt"] < newest, "the list is not newest first"
            assert summary["contextId"] not in seen, "a conversation listed twice"
            newest = summary["updatedAt"]
            seen.add(summary["contextId"])
        if body["nextCursor"] is None:
            break
        assert len(conversations) == plan.page, "a short page before the last"
        query = {"limit": plan.page, "cursor": body["nextCursor"]}
        times.append(page_time(client, url, {"limit": plan.page})[0])  # a sidebar refresh
    assert len(seen) == plan.conversations, f"listed {len(seen)} of {plan.conversations}"
    return times


def page_time(client: httpx.Client, url: str, query: dict[str, Any]) -> tuple[float, Any]:
    started_at = time.perf_counter()
    response = client.get(url, params=query)
    elapsed = time.perf_counter() - started_at
    response.raise_for_status()
    return elapsed, json.loads(response.content)
