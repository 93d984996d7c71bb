"""Paced streams: how many concurrent streams of a model at 50 tokens/s one server core
sustains with each stream taking at most 1.1x its ideal time.

A probe at concurrency C runs C workers, each opening two streams of N deltas one after
the other, their first streams spread over one ideal stream time so the load ramps up
rather than arriving at once; the second streams run at full load and are the ones
measured (a failure of any stream fails the probe). C passes when the median stream
takes at most `tolerance` x the ideal time (N x the interval: 2 s for 100 tokens at 50
a second) and no stream failed.

The search doubles C from `start` until a probe fails (or halves it until one passes),
then bisects until the step is under `resolution`; later rounds start from the first
round's answer with a finer step. A probe that fails is run again at once, and only a
second failure counts: other work on the machine can slow one probe down. The servers
take turns probe by probe, so the machine's other work falls on all of them alike, and
each round is bounded in time.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from bench.generator import LoadGenerator
from bench.stats import median, percentile
from bench.throughput import SERVERS, server_for

__all__ = ["CapacityPlan", "Search", "run_capacity"]


@dataclass(frozen=True)
class CapacityPlan:
    deltas: int = 100
    #: Seconds between deltas: 50 tokens/s.
    interval: float = 0.02
    start: int = 100
    #: Never probe past this many streams (files, ports).
    limit: int = 3000
    tolerance: float = 1.1
    #: Bisect until the bracket is narrower than this fraction of its low end.
    resolution: float = 0.08
    #: Probes per server per round at most.
    probes: int = 10
    rounds: int = 3
    servers: tuple[str, ...] = ("bare", "thinwire", "thinwire-ws")

    @property
    def pace(self) -> str:
        return str(self.interval)

    @property
    def ideal_s(self) -> float:
        """A model at 1/interval tokens a second takes this long to say them."""
        return self.deltas * self.interval


@dataclass
class Search:
    """Where one server's search stands: the most streams that passed, the fewest that
    failed, and the next concurrency to try (None: done)."""

    start: int
    step: float
    limit: int
    resolution: float
    passed: int = 0
    failed: int | None = None
    next: int | None = None
    probes: list[dict[str, Any]] = field(default_factory=list)
    retried: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.next = max(1, min(self.start, self.limit))

    def record(self, concurrency: int, ok: bool) -> None:
        if not ok and concurrency not in self.retried:
            # Other work on the machine can slow one probe down: a failure counts only
            # when the same concurrency fails again right after.
            self.retried.add(concurrency)
            self.next = concurrency
            return
        if ok:
            self.passed = max(self.passed, concurrency)
        else:
            self.failed = concurrency if self.failed is None else min(self.failed, concurrency)
        if self.failed is None:
            grown = min(self.limit, int(concurrency * self.step) + 1)
            self.next = None if concurrency >= self.limit else grown
        elif not self.passed:
            shrunk = int(concurrency / self.step)
            self.next = shrunk if shrunk >= 1 and shrunk < concurrency else None
        elif self.failed - self.passed <= max(1, self.passed * self.resolution):
            self.next = None
        else:
            self.next = (self.passed + self.failed) // 2


def probe(
    generator: LoadGenerator,
    name: str,
    server: Any,
    target: Any,
    concurrency: int,
    plan: CapacityPlan,
) -> dict[str, Any]:
    ideal = plan.ideal_s
    cpu = server.cpu()
    cell = generator.run(
        target,
        concurrency,
        2 * concurrency,
        plan.deltas,
        budget=3 * ideal + 60,
        pace=plan.pace,
        stagger=ideal,
    )
    server_cpu = server.cpu() - cpu
    ok = [r for r in cell.results if r.ok]
    failures = len(cell.results) - len(ok)
    totals = [r.total for r in ok]
    p50 = percentile(totals, 0.5)
    delivered = concurrency * 2 * plan.deltas  # the ramp's streams too: they cost CPU
    return {
        "server": name,
        "concurrency": concurrency,
        "measured_streams": len(cell.results),
        "failures": failures,
        "errors": sorted({r.error for r in cell.results if not r.ok})[:3],
        "stream_p50_s": p50,
        "stream_p99_s": percentile(totals, 0.99),
        "first_delta_p50_ms": percentile([r.first_delta for r in ok], 0.5) * 1e3,
        "cpu_s_per_1k": server_cpu / (delivered / 1000),
        "server_cpu_util": server_cpu / cell.wall if cell.wall else 0.0,
        "loadgen_cpu_util": cell.busiest,
        "ok": failures == 0 and bool(ok) and p50 <= plan.tolerance * ideal,
    }


def run_capacity(
    plan: CapacityPlan, servers: Sequence[str], generator: LoadGenerator
) -> dict[str, Any]:
    """Each round's answer per server, its median, and every probe. The plan's servers
    that `servers` names, and any it names that the streams suite does not run unasked
    (`thinwire-nostore`)."""
    names = [s for s in plan.servers if s in servers]
    names += [s for s in servers if s not in SERVERS and s not in names]
    rounds: list[dict[str, Any]] = []
    with ExitStack() as stack:
        running = {name: stack.enter_context(server_for(name)) for name in names}
        for _, target in running.values():  # warm-up
            generator.run(target, 10, 20, plan.deltas, 30.0, pace="yield")
        first: dict[str, int] = {}
        for round_ in range(1, plan.rounds + 1):
            searches = {
                name: Search(
                    start=first.get(name, plan.start),
                    step=2.0 if name not in first else 1.15,
                    limit=plan.limit,
                    resolution=plan.resolution,
                )
                for name in names
            }
            for _ in range(plan.probes):
                pending = [n for n in names if searches[n].next is not None]
                if not pending:
                    break
                for name in pending:
                    search = searches[name]
                    assert search.next is not None
                    server, target = running[name]
                    result = probe(generator, name, server, target, search.next, plan)
                    result["round"] = round_
                    search.probes.append(result)
                    search.record(result["concurrency"], result["ok"])
                    print(
                        f"  round {round_}  paced  {name:<12} C={result['concurrency']:<5}"
                        f" stream p50 {result['stream_p50_s']:5.2f} s"
                        f" (ideal {plan.ideal_s:.2f})"
                        f"  server CPU {result['server_cpu_util']:4.0%}"
                        f"  load gen {result['loadgen_cpu_util']:4.0%}"
                        f"  {'ok' if result['ok'] else 'over'}",
                        flush=True,
                    )
            answer = {name: searches[name].passed for name in names}
            if round_ == 1:
                first = {name: max(1, passed) for name, passed in answer.items()}
            rounds.append(
                {
                    "round": round_,
                    "sustained": answer,
                    "bracket": {
                        name: [searches[name].passed, searches[name].failed] for name in names
                    },
                    "probes": [p for name in names for p in searches[name].probes],
                }
            )
    return summarize_capacity(plan, names, rounds)


def summarize_capacity(
    plan: CapacityPlan, names: Sequence[str], rounds: list[dict[str, Any]]
) -> dict[str, Any]:
    rows = []
    for name in names:
        sustained = [r["sustained"][name] for r in rounds]
        ratios = [
            r["sustained"][name] / r["sustained"]["bare"]
            for r in rounds
            if name != "bare" and r["sustained"].get("bare")
        ]
        at = [
            p
            for r in rounds
            for p in r["probes"]
            if p["server"] == name and p["ok"] and p["concurrency"] == r["sustained"][name]
        ]
        rows.append(
            {
                "server": name,
                "sustained": sustained,
                "sustained_median": median(sustained),
                "ratios": ratios,
                "ratio": median(ratios) if ratios else None,
                "stream_p50_s": median(p["stream_p50_s"] for p in at),
                "stream_p99_s": median(p["stream_p99_s"] for p in at),
                "cpu_s_per_1k": median(p["cpu_s_per_1k"] for p in at),
                "server_cpu_util": median(p["server_cpu_util"] for p in at),
                "loadgen_cpu_util": max((p["loadgen_cpu_util"] for p in at), default=0.0),
            }
        )
    return {
        "deltas": plan.deltas,
        "interval_s": plan.interval,
        "ideal_s": plan.ideal_s,
        "tolerance": plan.tolerance,
        "rows": rows,
        "rounds": rounds,
    }
