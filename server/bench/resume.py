"""Cold resume: a conversation of 10 or 1,000 turns, not in the server's memory, read back.

The contexts are written to SQLite first, then a fresh server process opens the store and
serves `GET /agents/{agent}/contexts/{id}` for each of them once: each request reads the
stored transcript (and the small part of the record) and answers it. Measured from the
request's first byte out to the response's last byte in, on one kept-alive connection.

What the first *send* to such a context pays on top, restoring the whole record (history
included) into a live context, is measured after the reads as `restore`: a reattach
(`GET …/events`) of each context, which restores it to find there is nothing to replay.
Then one `send` of a short reply to each: what a run costs in a conversation that long
(its time, and the server's CPU per send).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.procs import Server, free_port, python_server, started
from bench.stats import percentile
from thinwire.identity import ANONYMOUS
from thinwire.ids import new_context_id
from thinwire.stores import ContextRecord, SQLiteStore

__all__ = ["run_resume"]

#: Whether a response (status, body) to a GET of a context of so many turns is right.
Check = Callable[[int, bytes, int], bool]

USER_TEXT = "Could you tell me a little more about that, with an example? " * 2
REPLY_TEXT = "Sure. Here is a longer answer that goes on for a while, as replies do. " * 6


def conversation(context_id: str, turns: int) -> ContextRecord:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a benchmark."}]
    transcript: list[dict[str, Any]] = []
    for turn in range(turns):
        if turn % 2 == 0:
            history.append({"role": "user", "content": USER_TEXT})
            transcript.append(
                {"role": "user", "text": USER_TEXT, "toolCalls": [], "stopReason": None}
            )
        else:
            history.append({"role": "assistant", "content": REPLY_TEXT, "stopReason": "end"})
            transcript.append(
                {"role": "assistant", "text": REPLY_TEXT, "toolCalls": [], "stopReason": "end"}
            )
    now = time.time()
    return ContextRecord(
        id=context_id,
        agent="deltas",
        owner=ANONYMOUS,
        history=history,
        transcript=transcript,
        last_seq=turns * 10,
        created_at=now,
        updated_at=now,
    )


async def write_contexts(data_dir: Path, sizes: dict[int, int]) -> dict[int, list[str]]:
    """`sizes`: turns -> how many contexts of that many turns. Returns their ids."""
    store = SQLiteStore.in_directory(data_dir)
    ids: dict[int, list[str]] = {}
    try:
        for turns, count in sizes.items():
            ids[turns] = []
            for _ in range(count):
                record = conversation(new_context_id(), turns)
                await store.create(record)
                ids[turns].append(record.id)
    finally:
        await store.close()
    return ids


class Connection:
    """One kept-alive HTTP/1.1 connection for GET requests with a Content-Length."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**24)
        return cls(reader, writer)

    async def get(self, path: str) -> tuple[int, bytes]:
        self.writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def read_back(status: int, body: bytes, turns: int) -> bool:
    """A transcript read: 200 with every turn."""
    return status == 200 and len(json.loads(body)["turns"]) == turns


def restored(status: int, body: bytes, turns: int) -> bool:
    """A reattach to a context with no run: nothing to replay (204), but the server
    restores the whole record into a live context to find that out, as a send would."""
    return status == 204


async def time_gets(
    port: int, ids: dict[int, list[str]], suffix: str, expected: Check
) -> dict[int, list[float]]:
    """`GET /agents/deltas/contexts/{id}{suffix}` of each context, timed."""
    connection = await Connection.open(port)
    timings: dict[int, list[float]] = {}
    try:
        for turns, context_ids in ids.items():
            timings[turns] = []
            for context_id in context_ids:
                path = f"/agents/deltas/contexts/{context_id}{suffix}"
                began = time.perf_counter()
                status, body = await connection.get(path)
                timings[turns].append(time.perf_counter() - began)
                if not expected(status, body, turns):
                    raise RuntimeError(f"GET {path}: {status} {body[:200]!r}")
    finally:
        connection.close()
    return timings


#: Deltas a measured send asks the bench agent for: a short reply, so the figure is
#: what the conversation's length costs, not what streaming does.
SEND_DELTAS = 20


async def send_once(port: int, context_id: str) -> bytes:
    """POST a run to `context_id` on a connection of its own; the whole SSE response."""
    body = json.dumps({"contextId": context_id, "message": {"text": str(SEND_DELTAS)}})
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(
            (
                "POST /agents/deltas/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
            ).encode()
        )
        return await reader.read()  # to the end: the server closes after `done`
    finally:
        writer.close()


async def time_sends(
    port: int, ids: dict[int, list[str]], server: Server
) -> dict[int, tuple[list[float], float]]:
    """A send to each (restored) context: its time, and the server's CPU per send."""
    results: dict[int, tuple[list[float], float]] = {}
    for turns, context_ids in ids.items():
        timings: list[float] = []
        cpu = server.cpu()
        for context_id in context_ids:
            began = time.perf_counter()
            response = await send_once(port, context_id)
            timings.append(time.perf_counter() - began)
            if (
                b" 200 " not in response.split(b"\r\n", 1)[0]
                or b'"stopReason":"end"' not in response
            ):
                raise RuntimeError(f"send to {context_id}: {response[:200]!r}")
        results[turns] = (timings, (server.cpu() - cpu) / len(context_ids))
    return results


def run_resume(sizes: tuple[int, ...], count: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="thinwire-bench-") as directory:
        data_dir = Path(directory)
        # 20 small contexts to warm the server up with, read before the measured ones.
        warm = asyncio.run(write_contexts(data_dir, {10: 20}))
        ids = asyncio.run(write_contexts(data_dir, {turns: count for turns in sizes}))
        port = free_port()
        argv = python_server("thinwire", port, "--data-dir", str(data_dir))
        with started("thinwire", argv, port) as server:
            asyncio.run(time_gets(port, warm, "", read_back))
            timings = asyncio.run(time_gets(port, ids, "", read_back))
            restores = asyncio.run(time_gets(port, ids, "/events", restored))
            sends = asyncio.run(time_sends(port, ids, server))
    rows = []
    for turns, values in timings.items():
        row = {
            "turns": turns,
            "contexts": len(values),
            "p50_ms": percentile(values, 0.5) * 1e3,
            "p99_ms": percentile(values, 0.99) * 1e3,
            "max_ms": max(values) * 1e3,
            "restore_p50_ms": percentile(restores[turns], 0.5) * 1e3,
            "restore_p99_ms": percentile(restores[turns], 0.99) * 1e3,
            "send_p50_ms": percentile(sends[turns][0], 0.5) * 1e3,
            "send_p99_ms": percentile(sends[turns][0], 0.99) * 1e3,
            "send_cpu_ms": sends[turns][1] * 1e3,
        }
        rows.append(row)
        print(
            f"  cold resume of {turns:>5} turns: p50 {row['p50_ms']:.2f} ms,"
            f" p99 {row['p99_ms']:.2f} ms",
            flush=True,
        )
    return rows
