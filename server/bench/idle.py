"""Idle streams: what 2,000 attached, heart-beating streams cost a server in memory.

Each stream is a real one: for thinwire a run of an agent that waits for an event that
never comes (its POST /runs stream sends `run_start`, then only heartbeats), for the
others a response that only heart-beats. The heartbeat interval is short (1 s) so every
stream beats several times while it is measured.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.load import Target, open_idle, run_cell
from bench.procs import Server, free_port, python_server, started

__all__ = ["run_idle"]

HEARTBEAT = 1.0


@contextmanager
def idle_server(name: str) -> Iterator[tuple[Server, Target, Target]]:
    """The server, its idle target, and a streaming target to warm it up with."""
    port = free_port()
    beat = ["--heartbeat", str(HEARTBEAT)]
    if name == "thinwire":
        with tempfile.TemporaryDirectory(prefix="thinwire-bench-") as data_dir:
            argv = python_server("thinwire", port, "--data-dir", data_dir, *beat)
            with started(name, argv, port) as server:
                body = '{{"message": {{"text": "{deltas}"}}}}'
                yield (
                    server,
                    Target(name, port, "/agents/gated/runs", body=body),
                    Target(name, port, "/agents/deltas/runs", body=body),
                )
        return
    with started(name, python_server(name, port, *beat), port) as server:
        yield server, Target(name, port, "/idle"), Target(name, port, "/stream")


async def measure(server: Server, idle: Target, warm: Target, count: int) -> dict[str, Any]:
    await run_cell(warm, 10, 50, 20, 10)
    await asyncio.sleep(0.5)
    before = server.rss()
    began = time.perf_counter()
    streams = await open_idle(idle, count)
    opened = time.perf_counter() - began
    beats = sum(s.heartbeats for s in streams)
    await asyncio.sleep(3 * HEARTBEAT + 0.2)
    after = server.rss()
    beat_counts = sorted(s.heartbeats for s in streams)
    beats = sum(beat_counts) - beats
    cpu = server.cpu()
    await asyncio.sleep(2 * HEARTBEAT)
    idle_cpu = (server.cpu() - cpu) / (2 * HEARTBEAT)
    for stream in streams:
        stream.close()
    return {
        "streams": len(streams),
        "open_s": opened,
        "rss_before_mb": before / 2**20,
        "rss_after_mb": after / 2**20,
        "kb_per_stream": (after - before) / len(streams) / 1024,
        "heartbeats_per_stream": beats / len(streams),
        "fewest_heartbeats": beat_counts[0],
        "idle_cpu_util": idle_cpu,
    }


def run_idle(count: int, servers: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for name in servers:
        with idle_server(name) as (server, idle, warm):
            row = {"server": name, **asyncio.run(measure(server, idle, warm, count))}
        rows.append(row)
        print(
            f"  {name:<14} {row['streams']} idle streams: {row['kb_per_stream']:.1f} KB each,"
            f" {row['heartbeats_per_stream']:.1f} heartbeats each",
            flush=True,
        )
    return rows
