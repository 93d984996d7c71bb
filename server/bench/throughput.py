"""Streams side by side: C concurrent streams of N deltas against each server under test,
for each workload (how the agent hands its deltas over, see `servers.py`).

Each server runs in a process of its own, started once for the suite. A warm-up goes
first (imports, the first SQLite connection), then the rounds: each round runs every
workload at every concurrency against every server in a row, so whatever else the
machine does falls on all of them alike, and each figure is compared with bare's of the
same round (`paired`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from bench.generator import Cell, LoadGenerator
from bench.load import Target
from bench.procs import Server, free_port, node_server, python_server, started
from bench.stats import percentile

__all__ = ["SERVERS", "Plan", "Workload", "run_throughput", "server_for", "summarize"]

SERVERS = (
    "bare",
    "bare-batched",
    "thinwire",
    "thinwire-ws",
    "thinwire-memory",
    "sse-starlette",
    "ai-sdk",
)
#: What a thinwire run is asked for: the `deltas` agent, the work in the message.
THINWIRE_BODY = '{{"message": {{"text": "{text}"}}}}'


@dataclass(frozen=True)
class Workload:
    #: "burst" (no await between deltas) or "yield" (one loop tick between them).
    name: str
    #: (concurrency, streams in all) of each cell.
    cells: tuple[tuple[int, int], ...]
    #: The servers it runs against (bare first: the others are compared with it).
    servers: tuple[str, ...] = SERVERS
    #: (server, concurrency) cells left out: too slow to be worth the wait.
    skip: tuple[tuple[str, int], ...] = ()

    @property
    def pace(self) -> str:
        return self.name


@dataclass(frozen=True)
class Plan:
    deltas: int
    workloads: tuple[Workload, ...]
    #: No stream of a cell is started after this many seconds.
    budget: float
    #: Each cell runs this many times, interleaved with the others.
    rounds: int = 3


@contextmanager
def server_for(name: str, *extra: str) -> Iterator[tuple[Server, Target]]:
    """The server `name` of the bench's streams, running, and how to ask it for one."""
    port = free_port()
    if name == "ai-sdk":
        with started(name, node_server(port), port) as server:
            yield server, Target(name, port, "/chat")
        return
    if name.startswith("thinwire"):
        with tempfile.TemporaryDirectory(prefix="thinwire-bench-") as data_dir:
            argv = python_server("thinwire", port, "--data-dir", data_dir, *extra)
            if name == "thinwire-memory":
                argv += ["--store", "memory"]
            elif name == "thinwire-nostore":
                argv += ["--store", "none"]
            with started(name, argv, port) as server:
                if name == "thinwire-ws":
                    yield server, Target(name, port, "/agents/deltas/ws", transport="ws")
                else:
                    yield server, Target(name, port, "/agents/deltas/runs", body=THINWIRE_BODY)
        return
    if name == "bare-batched":
        with started(name, python_server("bare", port), port) as server:
            yield server, Target(name, port, "/batched")
        return
    with started(name, python_server(name, port), port) as server:
        yield server, Target(name, port, "/stream")


def summarize(
    name: str,
    concurrency: int,
    cell: Cell,
    server_cpu: float,
    peak_rss: int,
) -> dict[str, Any]:
    results, wall = cell.results, cell.wall
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
        "loadgen_cpu_s_per_1k": sum(cell.cpu) / thousands,
        "loadgen_cpu_util": cell.busiest,
        "loadgen_processes": len(cell.cpu),
    }


def measure(
    generator: LoadGenerator,
    name: str,
    server: Server,
    target: Target,
    concurrency: int,
    streams: int,
    deltas: int,
    budget: float,
    pace: str,
    *,
    workload: str,
    round_: int,
) -> dict[str, Any]:
    """One cell against one server: its row (tagged with its workload and round), also
    printed as it comes."""
    server.reset_peak()
    cpu = server.cpu()
    cell = generator.run(target, concurrency, streams, deltas, budget, pace)
    server_cpu = server.cpu() - cpu
    row = summarize(name, concurrency, cell, server_cpu, server.peak_rss())
    row["workload"] = workload
    row["round"] = round_
    print(
        f"  round {round_}  {workload:<6} {name:<16} C={concurrency:<4}"
        f" {row['deltas_per_s']:>9,.0f} deltas/s"
        f"  {row['cpu_s_per_1k'] * 1e3:6.2f} ms CPU / 1k"
        f"  first delta p50 {row['ttff_p50_ms']:7.2f} ms"
        f"  failures {row['failures']}",
        flush=True,
    )
    return row


def run_throughput(
    plan: Plan, servers: Sequence[str], generator: LoadGenerator
) -> list[dict[str, Any]]:
    """Every row of every round (see `stats.paired` for what the report makes of them)."""
    wanted = [s for s in SERVERS if s in servers] + [s for s in servers if s not in SERVERS]
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        running = {name: stack.enter_context(server_for(name)) for name in wanted}
        for _, target in running.values():
            generator.run(target, 10, 40, plan.deltas, plan.budget)  # warm-up
        for round_ in range(1, plan.rounds + 1):
            for workload in plan.workloads:
                for concurrency, streams in workload.cells:
                    for name in wanted:
                        if name in SERVERS and name not in workload.servers:
                            continue
                        if (name, concurrency) in workload.skip:
                            continue
                        server, target = running[name]
                        rows.append(
                            measure(
                                generator,
                                name,
                                server,
                                target,
                                concurrency,
                                streams,
                                plan.deltas,
                                plan.budget,
                                workload.pace,
                                workload=workload.name,
                                round_=round_,
                            )
                        )
    return rows
