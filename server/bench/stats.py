"""Percentiles, medians and pairing rounds: the little arithmetic the suites share.

A figure of one round is compared with bare's of the same round (`paired`): the machine's
other work falls on both alike within a round, not across rounds. The report shows each
round's ratio and their median, never the best round of each server.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["FIGURES", "median", "paired", "per_round", "percentile"]

Row = dict[str, Any]

#: The figures of a streams row, as medians over rounds; each also as a ratio to bare's.
FIGURES = (
    "deltas_per_s",
    "ttff_p50_ms",
    "ttff_p99_ms",
    "total_p50_ms",
    "total_p99_ms",
    "cpu_s_per_1k",
    "peak_rss_mb",
    "loadgen_cpu_s_per_1k",
    "loadgen_cpu_util",
)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def median(values: Iterable[float]) -> float:
    found = list(values)
    return statistics.median(found) if found else 0.0


def _key(row: Row) -> tuple[Any, ...]:
    return (row.get("workload"), row["server"], row["concurrency"])


def per_round(
    rows: Sequence[Row], server: str, other: str, key: str, *, workload: Any, concurrency: int
) -> list[float]:
    """`server`'s figure over `other`'s, round by round (the rounds both have)."""
    mine = {r["round"]: r for r in rows if _key(r) == (workload, server, concurrency)}
    theirs = {r["round"]: r for r in rows if _key(r) == (workload, other, concurrency)}
    return [
        mine[n][key] / theirs[n][key] for n in sorted(mine.keys() & theirs.keys()) if theirs[n][key]
    ]


def paired(rows: Sequence[Row], baseline: str = "bare") -> list[Row]:
    """One row per (workload, server, C): the median of each figure over the rounds and,
    under "ratios", each round's ratio to `baseline`'s figure of the same round, with
    their median under "ratio"; "overhead_ms" is the first-delta p50 minus baseline's,
    round by round, as a median."""
    order: list[tuple[Any, ...]] = []
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for row in rows:
        key = _key(row)
        if key not in groups:
            order.append(key)
            groups[key] = []
        groups[key].append(row)
    summaries = []
    for key in order:
        workload, server, concurrency = key
        group = sorted(groups[key], key=lambda r: r.get("round", 1))
        summary: Row = {
            "workload": workload,
            "server": server,
            "concurrency": concurrency,
            "rounds": len(group),
            "streams": sum(r["streams"] for r in group),
            "failures": sum(r["failures"] for r in group),
            "errors": sorted({e for r in group for e in r.get("errors", [])})[:3],
            "loadgen_processes": max(r.get("loadgen_processes", 1) for r in group),
        }
        for figure in FIGURES:
            summary[figure] = median(r[figure] for r in group)
        if server != baseline:
            ratios = {
                figure: per_round(
                    rows, server, baseline, figure, workload=workload, concurrency=concurrency
                )
                for figure in FIGURES[:7]
            }
            summary["ratios"] = ratios
            summary["ratio"] = {figure: median(values) for figure, values in ratios.items()}
            base = {r["round"]: r for r in rows if _key(r) == (workload, baseline, concurrency)}
            summary["overhead_ms"] = median(
                r["ttff_p50_ms"] - base[r["round"]]["ttff_p50_ms"]
                for r in group
                if r.get("round") in base
            )
        summaries.append(summary)
    return summaries
