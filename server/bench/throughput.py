"""Streams side by side: C concurrent streams of N deltas against each server under test.

Each server runs in a fresh process of its own. A warm-up round goes first (imports, JIT,
the first SQLite connection), then one measured cell per concurrency.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from bench.load import Result, Target, run_cell
from bench.procs import Server, free_port, node_server, python_server, started
from bench.stats import percentile

__all__ = ["SERVERS", "Plan", "run_throughput"]

SERVERS = ("bare", "thinwire", "thinwire-ws", "thinwire-memory", "sse-starlette", "ai-sdk")


@dataclass(frozen=True)
class Plan:
    deltas: int
    #: concurrency -> streams in all
    cells: tuple[tuple[int, int], ...]
    #: No stream is started after this many seconds of a cell.
    budget: float


@contextmanager
def server_for(name: str) -> Iterator[tuple[Server, Target]]:
    port = free_port()
    if name == "ai-sdk":
        with started(name, node_server(port), port) as server:
            yield server, Target(name, port, "/chat")
        return
    if name.startswith("thinwire"):
        with tempfile.TemporaryDirectory(prefix="thinwire-bench-") as data_dir:
            argv = python_server("thinwire", port, "--data-dir", data_dir)
            if name == "thinwire-memory":
                argv += ["--store", "memory"]
            with started(name, argv, port) as server:
                if name == "thinwire-ws":
                    yield server, Target(name, port, "/agents/deltas/ws", transport="ws")
                else:
                    body = '{{"message": {{"text": "{deltas}"}}}}'
                    yield server, Target(name, port, "/agents/deltas/runs", body=body)
        return
    with started(name, python_server(name, port), port) as server:
        yield server, Target(name, port, "/stream")


def summarize(
    name: str,
    concurrency: int,
    results: Sequence[Result],
    wall: float,
    server_cpu: float,
    peak_rss: int,
    loadgen_cpu: float,
) -> dict[str, Any]:
    ok = [r for r in results if r.ok]
    delivered = sum(r.deltas for r in ok)
    thousands = max(delivered, 1) / 1000
    errors = sorted({r.error for r in results if not r.ok})
    return {
        "server": name,
        "concurrency": concurrency,
        "streams": len(results),
        "failures": len(results) - len(ok),
        "errors": errors[:3],
        "deltas": delivered,
        "wall_s": wall,
        "deltas_per_s": delivered / wall if wall else 0.0,
        "ttff_p50_ms": percentile([r.first_delta for r in ok], 0.5) * 1e3,
        "ttff_p99_ms": percentile([r.first_delta for r in ok], 0.99) * 1e3,
        "total_p50_ms": percentile([r.total for r in ok], 0.5) * 1e3,
        "total_p99_ms": percentile([r.total for r in ok], 0.99) * 1e3,
        "cpu_s_per_1k": server_cpu / thousands,
        "server_cpu_util": server_cpu / wall if wall else 0.0,
        "peak_rss_mb": peak_rss / 2**20,
        "loadgen_cpu_s_per_1k": loadgen_cpu / thousands,
        "loadgen_cpu_util": loadgen_cpu / wall if wall else 0.0,
    }


async def measure(
    name: str, server: Server, target: Target, concurrency: int, streams: int, plan: Plan
) -> dict[str, Any]:
    server.reset_peak()
    cpu, own = server.cpu(), time.process_time()
    results, wall = await run_cell(target, concurrency, streams, plan.deltas, plan.budget)
    server_cpu, loadgen_cpu = server.cpu() - cpu, time.process_time() - own
    return summarize(name, concurrency, results, wall, server_cpu, server.peak_rss(), loadgen_cpu)


def run_throughput(plan: Plan, servers: Sequence[str] = SERVERS) -> list[dict[str, Any]]:
    rows = []
    for name in servers:
        with server_for(name) as (server, target):
            asyncio.run(run_cell(target, 10, 40, plan.deltas, plan.budget))  # warm-up
            for concurrency, streams in plan.cells:
                row = asyncio.run(measure(name, server, target, concurrency, streams, plan))
                rows.append(row)
                print(
                    f"  {name:<14} C={concurrency:<4} {row['deltas_per_s']:>9,.0f} deltas/s"
                    f"  ttff p50 {row['ttff_p50_ms']:6.2f} ms  failures {row['failures']}",
                    flush=True,
                )
    return rows


def as_dict(plan: Plan) -> dict[str, Any]:
    return asdict(plan)
