"""`python -m bench`: run the suites, print the report, write the JSON."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.capacity import CapacityPlan, run_capacity
from bench.client import run_sizes
from bench.conversations import ConversationPlan, run_conversations
from bench.generator import LoadGenerator
from bench.idle import run_idle
from bench.listing import ListingPlan, run_listing
from bench.model import ModelPlan, run_model
from bench.procs import CORES, REPO, pin_self
from bench.render import run_render
from bench.report import report
from bench.serve import raise_file_limit
from bench.throughput import SERVERS, Plan, Workload, run_throughput

SUITES = ("streams", "paced", "model", "conversations", "listing", "idle", "client", "render")
#: The AI SDK handing over one delta per event-loop turn runs at ~2k deltas/s: 500 streams
#: of it would take the best part of a minute a round.
SLOW = (("ai-sdk", 500),)
FULL = Plan(
    deltas=200,
    workloads=(
        Workload("burst", ((1, 100), (50, 300), (500, 500))),
        Workload("yield", ((1, 100), (50, 300), (500, 500)), skip=SLOW),
    ),
    budget=15.0,
    rounds=3,
)
QUICK = Plan(
    deltas=200,
    workloads=(
        Workload("burst", ((1, 20), (50, 50), (500, 500))),
        Workload("yield", ((1, 20), (50, 50), (500, 500)), skip=SLOW),
    ),
    budget=5.0,
    rounds=1,
)
FULL_CAPACITY = CapacityPlan()
QUICK_CAPACITY = CapacityPlan(deltas=50, probes=6, rounds=1, resolution=0.15)
FULL_MODEL = ModelPlan()
QUICK_MODEL = ModelPlan(cells=((1, 20), (50, 100)), budget=5.0, rounds=1)
FULL_CONVERSATIONS = ConversationPlan()
QUICK_CONVERSATIONS = ConversationPlan(sizes=(10, 1000), sends=10, reads=10, live=100)


def machine() -> dict[str, Any]:
    node = shutil.which("node")
    return {
        "cpus": os.cpu_count(),
        "server_cores": sorted(CORES[0] or []),
        "load_generator_cores": sorted(CORES[1] or []),
        "python": platform.python_version(),
        "node": subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
        if node
        else None,
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer streams, for iterating")
    parser.add_argument("--only", default=",".join(SUITES), help=f"comma-separated: {SUITES}")
    parser.add_argument(
        "--servers", default=",".join(SERVERS), help="the servers of streams and paced"
    )
    parser.add_argument("--workloads", default="burst,yield", help="streams: burst,yield")
    parser.add_argument("--rounds", type=int, help="rounds of streams, paced and model")
    parser.add_argument(
        "--load-processes", type=int, help="load generator processes (default: one per core)"
    )
    parser.add_argument(
        "--connections",
        choices=("kept", "fresh"),
        default="kept",
        help="a load worker keeps its connection between streams, as clients do (kept), "
        "or opens one per stream (fresh)",
    )
    parser.add_argument("--out", type=Path, help="the JSON file (default .thinwire/bench/)")
    args = parser.parse_args(argv)
    suites = [s for s in args.only.split(",") if s]
    unknown = set(suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites: {sorted(unknown)}")
    pin_self()
    files = raise_file_limit()
    plan = QUICK if args.quick else FULL
    wanted = [w for w in args.workloads.split(",") if w]
    plan = Plan(
        plan.deltas,
        tuple(w for w in plan.workloads if w.name in wanted),
        plan.budget,
        args.rounds or plan.rounds,
    )
    capacity = QUICK_CAPACITY if args.quick else FULL_CAPACITY
    model = QUICK_MODEL if args.quick else FULL_MODEL
    if args.rounds:
        capacity = CapacityPlan(**{**asdict(capacity), "rounds": args.rounds})
        model = ModelPlan(**{**asdict(model), "rounds": args.rounds})
    conversations = QUICK_CONVERSATIONS if args.quick else FULL_CONVERSATIONS
    servers = tuple(s for s in args.servers.split(",") if s)
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": args.quick,
        "machine": machine(),
        "plan": {
            "deltas": plan.deltas,
            "workloads": [asdict(w) for w in plan.workloads],
            "budget_s": plan.budget,
            "rounds": plan.rounds,
            "connections": args.connections,
            "capacity": asdict(capacity),
            "model": asdict(model),
            "conversations": asdict(conversations),
        },
    }
    began = time.perf_counter()
    seconds: dict[str, float] = {}

    def timed(suite: str, run: Callable[[], Any]) -> Any:
        print(suite, flush=True)
        start = time.perf_counter()
        try:
            return run()
        finally:
            seconds[suite] = time.perf_counter() - start
            print(f"  ({seconds[suite]:.0f} s)", flush=True)

    with LoadGenerator(args.load_processes, keep=args.connections == "kept") as generator:
        results["machine"]["load_generator_processes"] = generator.processes
        if "streams" in suites:
            results["streams"] = timed("streams", lambda: run_throughput(plan, servers, generator))
        if "paced" in suites:
            results["capacity"] = timed(
                "paced streams per core", lambda: run_capacity(capacity, servers, generator)
            )
        if "model" in suites:
            results["model"] = timed("model-backed agent", lambda: run_model(model, generator))
    if "conversations" in suites:
        results["conversations"] = timed(
            "long conversations", lambda: run_conversations(conversations)
        )
    if "listing" in suites:
        listing = ListingPlan(passes=1) if args.quick else ListingPlan()
        results["listing"] = timed("conversation list", lambda: run_listing(listing))
    if "idle" in suites:
        count = 500 if args.quick else 2000
        if files < count * 2 + 100:
            count = max(100, (files - 100) // 2)
        results["idle"] = timed(
            "idle", lambda: run_idle(count, ("bare", "thinwire", "sse-starlette"))
        )
    if "client" in suites:
        results["client"] = timed("client sizes", run_sizes)
    if "render" in suites:
        deltas, rounds = (5000, 1) if args.quick else (10000, 3)
        results["render"] = timed("render", lambda: run_render(deltas, rounds))
    results["suite_seconds"] = seconds
    results["seconds"] = time.perf_counter() - began
    out = args.out or REPO / ".thinwire" / "bench" / time.strftime("bench-%Y%m%d-%H%M%S.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(report(results))
    print(f"\n{results['seconds']:.0f} s; figures in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
