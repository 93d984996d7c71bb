"""The report: Markdown tables with each figure's ratio to bare, and the targets."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["report", "targets"]

Row = dict[str, Any]


def _bare(rows: Sequence[Row], concurrency: int) -> Row | None:
    return next(
        (r for r in rows if r["server"] == "bare" and r["concurrency"] == concurrency), None
    )


def _row(rows: Sequence[Row], server: str, concurrency: int) -> Row | None:
    return next(
        (r for r in rows if r["server"] == server and r["concurrency"] == concurrency), None
    )


def _cell(row: Row, bare: Row | None, key: str, fmt: Callable[[float], str]) -> str:
    value = row[key]
    if bare is None or not bare[key] or row["server"] == "bare":
        return fmt(value)
    return f"{fmt(value)} ({value / bare[key]:.2f}x)"


def _rate(value: float) -> str:
    return f"{value / 1000:,.1f}k"


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def streams_table(rows: Sequence[Row], deltas: int, rounds: int = 1) -> list[str]:
    best = f"best of {rounds} rounds, " if rounds > 1 else ""
    lines = [
        f"### Streams of {deltas} deltas ({best}ratio to bare at the same C)",
        "",
        "| server | C | deltas/s | first delta p50 ms | p99 ms | stream p50 ms | p99 ms "
        "| CPU s / 1k deltas | peak RSS MB | failures | load gen CPU s / 1k (busy) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        bare = _bare(rows, row["concurrency"])
        cells = [
            row["server"],
            str(row["concurrency"]),
            _cell(row, bare, "deltas_per_s", _rate),
            _cell(row, bare, "ttff_p50_ms", _ms),
            _cell(row, bare, "ttff_p99_ms", _ms),
            _cell(row, bare, "total_p50_ms", _ms),
            _cell(row, bare, "total_p99_ms", _ms),
            _cell(row, bare, "cpu_s_per_1k", lambda v: f"{v:.4f}"),
            _cell(row, bare, "peak_rss_mb", lambda v: f"{v:.0f}"),
            f"{row['failures']}/{row['streams']}",
            f"{row['loadgen_cpu_s_per_1k']:.4f} ({row['loadgen_cpu_util']:.0%})",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def idle_table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "### Idle streams",
        "",
        "| server | streams | RSS before MB | RSS after MB | KB / stream | heartbeats / stream "
        "| CPU while idle |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['server']} | {row['streams']} | {row['rss_before_mb']:.0f} "
            f"| {row['rss_after_mb']:.0f} | {row['kb_per_stream']:.1f} "
            f"| {row['heartbeats_per_stream']:.1f} | {row['idle_cpu_util']:.0%} |"
        )
    return lines


def resume_table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "### Cold resume (GET transcript of a context not in memory, SQLite)",
        "",
        "| turns | contexts | p50 ms | p99 ms | max ms | restore p50 ms | restore p99 ms "
        "| send p50 ms | send p99 ms | server CPU ms / send |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['turns']} | {row['contexts']} | {row['p50_ms']:.2f} "
            f"| {row['p99_ms']:.2f} | {row['max_ms']:.2f} "
            f"| {row['restore_p50_ms']:.2f} | {row['restore_p99_ms']:.2f} "
            f"| {row['send_p50_ms']:.2f} | {row['send_p99_ms']:.2f} | {row['send_cpu_ms']:.2f} |"
        )
    return lines


def client_table(client: dict[str, Any], render: dict[str, Any]) -> list[str]:
    lines = [
        "### Client",
        "",
        "| bundle (esbuild, minified, React external) | min KB | min+gzip KB |",
    ]
    lines.append("|---|--:|--:|")
    for size in client.get("sizes", []):
        if "gzipBytes" in size:
            lines.append(
                f"| {size['name']} | {size['minBytes'] / 1024:.1f} "
                f"| {size['gzipBytes'] / 1024:.1f} |"
            )
        else:
            lines.append(f"| {size['name']} | failed | {size['error']} |")
    if render and "commits_per_s" in render:
        lines += [
            "",
            f"React commits while streaming in Chromium: **{render['commits_per_s']:.1f}/s** "
            f"(worst of {render['rounds']} replies of {render['deltas']:,} deltas, delivered at "
            f"≥ {render['deltas_per_s']:,.0f} deltas/s; failures {render['failures']}).",
        ]
    return lines


def _gzip(client: dict[str, Any], name: str) -> int | None:
    size = next((s for s in client.get("sizes", []) if s["name"] == name), None)
    return size.get("gzipBytes") if size else None


def targets(results: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """(target, measured, met) for each target the run has figures for."""
    found: list[tuple[str, str, bool | None]] = []
    streams = results.get("streams") or []
    for concurrency in (50, 500):
        row, bare = _row(streams, "thinwire", concurrency), _bare(streams, concurrency)
        if row and bare:
            ratio = row["deltas_per_s"] / bare["deltas_per_s"]
            found.append(
                (f"thinwire deltas/s ≥ 0.8x bare at C={concurrency}", f"{ratio:.2f}x", ratio >= 0.8)
            )
    row, bare = _row(streams, "thinwire", 1), _bare(streams, 1)
    if row and bare:
        overhead = row["ttff_p50_ms"] - bare["ttff_p50_ms"]
        found.append(
            (
                "first-delta overhead ≤ 2 ms p50 over bare at C=1",
                f"{overhead:+.2f} ms",
                overhead <= 2,
            )
        )
    idle = next((r for r in results.get("idle") or [] if r["server"] == "thinwire"), None)
    if idle:
        kb = idle["kb_per_stream"]
        found.append(("≤ 50 KB server memory per idle stream", f"{kb:.1f} KB", kb <= 50))
    resume = next((r for r in results.get("resume") or [] if r["turns"] == 1000), None)
    if resume:
        p99 = resume["p99_ms"]
        found.append(("cold resume of 1,000 turns ≤ 5 ms p99", f"{p99:.2f} ms", p99 <= 5))
    client = results.get("client") or {}
    ours, theirs = _gzip(client, "thinwire: useAgent"), _gzip(client, "ai-sdk: useChat")
    if ours and theirs:
        found.append(
            (
                "client ≤ ¼ of ai + @ai-sdk/react (min+gzip)",
                f"{ours / theirs:.2f}x",
                ours * 4 <= theirs,
            )
        )
    render = results.get("render") or {}
    if "commits_per_s" in render:
        rate = render["commits_per_s"]
        found.append(("≤ 60 React commits/s", f"{rate:.1f}/s", rate <= 60))
    return found


def report(results: dict[str, Any]) -> str:
    lines: list[str] = []
    if results.get("streams"):
        plan = results["plan"]
        lines += [*streams_table(results["streams"], plan["deltas"], plan.get("rounds", 1)), ""]
    if results.get("idle"):
        lines += [*idle_table(results["idle"]), ""]
    if results.get("resume"):
        lines += [*resume_table(results["resume"]), ""]
    if results.get("client") or results.get("render"):
        lines += [*client_table(results.get("client") or {}, results.get("render") or {}), ""]
    found = targets(results)
    if found:
        lines += ["### Targets", "", "| target | measured | |", "|---|--:|---|"]
        for target, measured, met in found:
            lines.append(f"| {target} | {measured} | {'met' if met else '**missed**'} |")
    return "\n".join(lines)
