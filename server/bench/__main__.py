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
from pathlib import Path
from typing import Any

from bench.client import run_sizes
from bench.idle import run_idle
from bench.procs import CORES, REPO, pin_self
from bench.render import run_render
from bench.report import report
from bench.resume import run_resume
from bench.serve import raise_file_limit
from bench.throughput import SERVERS, Plan, run_throughput

SUITES = ("streams", "idle", "resume", "client", "render")
FULL = Plan(deltas=200, cells=((1, 100), (50, 300), (500, 1000)), budget=20.0, rounds=2)
QUICK = Plan(deltas=200, cells=((1, 20), (50, 100), (500, 500)), budget=8.0)


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
    parser.add_argument("--servers", default=",".join(SERVERS), help="streams suite servers")
    parser.add_argument("--out", type=Path, help="the JSON file (default .thinwire/bench/)")
    args = parser.parse_args(argv)
    suites = [s for s in args.only.split(",") if s]
    unknown = set(suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites: {sorted(unknown)}")
    pin_self()
    files = raise_file_limit()
    plan = QUICK if args.quick else FULL
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": args.quick,
        "machine": machine(),
        "plan": {
            "deltas": plan.deltas,
            "cells": plan.cells,
            "budget_s": plan.budget,
            "rounds": plan.rounds,
        },
    }
    began = time.perf_counter()
    if "streams" in suites:
        print("streams", flush=True)
        servers = tuple(s for s in args.servers.split(",") if s)
        results["streams"] = run_throughput(plan, servers)
    if "idle" in suites:
        count = 500 if args.quick else 2000
        if files < count * 2 + 100:
            count = max(100, (files - 100) // 2)
        print("idle", flush=True)
        results["idle"] = run_idle(count, ("bare", "thinwire", "sse-starlette"))
    if "resume" in suites:
        print("cold resume", flush=True)
        results["resume"] = run_resume((10, 1000), 30 if args.quick else 100)
    if "client" in suites:
        print("client sizes", flush=True)
        results["client"] = run_sizes()
    if "render" in suites:
        print("render", flush=True)
        results["render"] = run_render(5000 if args.quick else 10000, 1 if args.quick else 3)
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
