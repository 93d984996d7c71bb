"""The report: Markdown tables with each figure's ratio to bare, and the targets.

Ratios are paired by round (`stats.paired`): each round's figure over bare's of the same
round, and the median of those; the figures themselves are medians over the rounds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench.stats import median, paired, per_round

__all__ = ["report", "targets"]

Row = dict[str, Any]
Check = tuple[str, str, bool | None]

WORKLOADS = {
    "burst": "the agent says its deltas without awaiting between them",
    "yield": "the agent awaits one loop tick (`asyncio.sleep(0)`) between deltas",
}


def _rate(value: float) -> str:
    return f"{value / 1000:,.1f}k"


def _ms(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def _us(value: float) -> str:
    """CPU seconds per 1k deltas as microseconds per delta."""
    return f"{value * 1e3:.1f}"


def _rounds(values: Sequence[float]) -> str:
    return " ".join(f"{v:.2f}" for v in values)


def _find(summaries: Sequence[Row], workload: str, server: str, concurrency: int) -> Row | None:
    return next(
        (
            r
            for r in summaries
            if r["workload"] == workload
            and r["server"] == server
            and r["concurrency"] == concurrency
        ),
        None,
    )


def _cell(row: Row, key: str, fmt: Callable[[float], str]) -> str:
    ratio = row.get("ratio", {}).get(key)
    if ratio is None:
        return fmt(row[key])
    return f"{fmt(row[key])} ({ratio:.2f}x)"


def streams_tables(results: dict[str, Any]) -> list[str]:
    plan = results["plan"]
    summaries = paired(results["streams"])
    lines: list[str] = []
    for workload in dict.fromkeys(r["workload"] for r in summaries):
        rows = [r for r in summaries if r["workload"] == workload]
        rounds = max(r["rounds"] for r in rows)
        lines += [
            f"### Streams of {plan['deltas']} deltas, {workload}:"
            f" {WORKLOADS.get(workload, workload)}",
            "",
            f"Median of {rounds} rounds; (ratio to bare), each round's ratio paired with"
            " bare's of the same round.",
            "",
            "| server | C | deltas/s | per round | first delta p50 ms | p99 ms | stream p50 ms "
            "| p99 ms | CPU µs / delta | per round | peak RSS MB | failures "
            "| load gen CPU µs / delta (busiest core) |",
            "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        ]
        for row in rows:
            ratios = row.get("ratios", {})
            cells = [
                row["server"],
                str(row["concurrency"]),
                _cell(row, "deltas_per_s", _rate),
                _rounds(ratios.get("deltas_per_s", [])),
                _cell(row, "ttff_p50_ms", _ms),
                _cell(row, "ttff_p99_ms", _ms),
                _cell(row, "total_p50_ms", _ms),
                _cell(row, "total_p99_ms", _ms),
                _cell(row, "cpu_s_per_1k", _us),
                _rounds(ratios.get("cpu_s_per_1k", [])),
                _cell(row, "peak_rss_mb", lambda v: f"{v:.0f}"),
                f"{row['failures']}/{row['streams']}",
                f"{_us(row['loadgen_cpu_s_per_1k'])} ({row['loadgen_cpu_util']:.0%})",
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    ws = websocket_rows(results["streams"])
    if ws:
        lines += [
            "### WebSocket vs SSE (thinwire-ws deltas/s over thinwire's, round by round)",
            "",
            "| workload | C | per round | median |",
            "|---|--:|--:|--:|",
        ]
        for workload, concurrency, ratios in ws:
            lines.append(
                f"| {workload} | {concurrency} | {_rounds(ratios)} | {median(ratios):.2f}x |"
            )
        lines.append("")
    return lines


def websocket_rows(rows: Sequence[Row]) -> list[tuple[str, int, list[float]]]:
    found = []
    cells = dict.fromkeys(
        (r["workload"], r["concurrency"]) for r in rows if r["server"] == "thinwire-ws"
    )
    for workload, concurrency in cells:
        ratios = per_round(
            rows,
            "thinwire-ws",
            "thinwire",
            "deltas_per_s",
            workload=workload,
            concurrency=concurrency,
        )
        if ratios:
            found.append((workload, concurrency, ratios))
    return found


def capacity_table(capacity: dict[str, Any]) -> list[str]:
    lines = [
        f"### Paced at {1 / capacity['interval_s']:.0f} tokens/s: concurrent streams one core"
        f" sustains ({capacity['deltas']} deltas, ideal {capacity['ideal_s']:.2f} s, median"
        f" stream ≤ {capacity['tolerance']}x ideal)",
        "",
        "| server | streams per round | median | ratio to bare per round | median "
        "| stream p50 s | p99 s | CPU µs / delta | server CPU | load gen (busiest core) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in capacity["rows"]:
        ratio = "" if row["ratio"] is None else f"{row['ratio']:.2f}x"
        lines.append(
            f"| {row['server']} | {' '.join(str(s) for s in row['sustained'])} "
            f"| {row['sustained_median']:.0f} | {_rounds(row['ratios'])} | {ratio} "
            f"| {row['stream_p50_s']:.2f} | {row['stream_p99_s']:.2f} "
            f"| {_us(row['cpu_s_per_1k'])} | {row['server_cpu_util']:.0%} "
            f"| {row['loadgen_cpu_util']:.0%} |"
        )
    return [*lines, ""]


def model_table(rows: Sequence[Row]) -> list[str]:
    lines = [
        "### A model-backed agent: ChatAgent over the OpenAI-compatible stub (its own"
        " process), against `run.say` of the same deltas, one per loop tick as a model"
        " hands them over",
        "",
        "| agent | C | deltas/s | CPU µs / token | ratio to run.say per round | median "
        "| first delta p50 ms | failures |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    summaries = paired(rows, baseline="thinwire-say")
    for row in summaries:
        ratios = row.get("ratios", {}).get("cpu_s_per_1k", [])
        ratio = row.get("ratio", {}).get("cpu_s_per_1k")
        lines.append(
            f"| {row['server']} | {row['concurrency']} | {_rate(row['deltas_per_s'])} "
            f"| {_us(row['cpu_s_per_1k'])} | {_rounds(ratios)} "
            f"| {'' if ratio is None else f'{ratio:.2f}x'} | {_ms(row['ttff_p50_ms'])} "
            f"| {row['failures']}/{row['streams']} |"
        )
    by_hand = [
        row
        for row in paired(rows, baseline="thinwire-sdk")
        if row["server"] == "thinwire-chat" and "ratio" in row
    ]
    if by_hand:
        lines.append("")
        lines.append(
            "thinwire-sdk streams the same model by hand (the SDK's chunks, `run.say` per"
            " content). ChatAgent's CPU per token over it, per round (median):"
        )
        for row in by_hand:
            ratios = row["ratios"]["cpu_s_per_1k"]
            lines.append(
                f"C={row['concurrency']}: {_rounds(ratios)} ({row['ratio']['cpu_s_per_1k']:.2f}x)."
            )
    return [*lines, ""]


def conversations_table(conversations: dict[str, Any]) -> list[str]:
    lines = [
        "### Long conversations (SQLite; cold: not in the server's memory)",
        "",
        "| turns | cold send CPU ms | first delta p50 ms | p99 ms | hot send CPU ms "
        "| first delta p50 ms | p99 ms | cold resume p50 ms | p99 ms "
        "| whole read p50 ms | p99 ms |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for turns, row in conversations["sizes"].items():
        cold, hot = row["cold"], row["hot"]
        lines.append(
            f"| {turns} | {cold['cpu_ms']:.2f} | {_ms(cold['first_delta_p50_ms'])} "
            f"| {_ms(cold['first_delta_p99_ms'])} | {hot['cpu_ms']:.2f} "
            f"| {_ms(hot['first_delta_p50_ms'])} | {_ms(hot['first_delta_p99_ms'])} "
            f"| {_ms(row['resume_p50_ms'])} | {_ms(row['resume_p99_ms'])} "
            f"| {_ms(row['read_p50_ms'])} | {_ms(row['read_p99_ms'])} |"
        )
    page = next((row["resume_page"] for row in conversations["sizes"].values()), None)
    if page:
        lines += ["", f"A resume reads the latest page ({page} exchanges), as `useAgent` does."]
    live = conversations.get("live")
    if live and "error" not in live:
        lines += [
            "",
            f"{live['conversations']:,} live conversations of {live['turns']:,} turns (one"
            f" send each): server RSS {live['rss_before_mb']:.0f} MB before,"
            f" {live['rss_after_mb']:.0f} MB after (peak {live['peak_rss_mb']:.0f} MB); the"
            f" live-context cache's byte bound: {live['cache_bytes'] / 2**20:.0f} MB."
            f" First delta of those sends p50 {_ms(live['first_delta_p50_ms'])} ms,"
            f" p99 {_ms(live['first_delta_p99_ms'])} ms.",
        ]
    elif live:
        lines += ["", f"Live conversations: not measured ({live['error']})."]
    return [*lines, ""]


def listing_table(listing: dict[str, Any]) -> list[str]:
    return [
        "### A user's conversations (SQLite, over HTTP)",
        "",
        f"{listing['pages']:,} pages of {listing['page']} through {listing['conversations']:,}"
        f" conversations of one user: p50 {_ms(listing['p50_ms'])} ms,"
        f" p99 {_ms(listing['p99_ms'])} ms.",
        "",
    ]


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
    return [*lines, ""]


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
    return [*lines, ""]


def _gzip(client: dict[str, Any], name: str) -> int | None:
    size = next((s for s in client.get("sizes", []) if s["name"] == name), None)
    return size.get("gzipBytes") if size else None


def stream_targets(results: dict[str, Any]) -> list[Check]:
    rows = results.get("streams") or []
    if not rows:
        return []
    summaries = paired(rows)
    found: list[Check] = []
    for concurrency in (50, 500):
        row = _find(summaries, "burst", "thinwire", concurrency)
        if row and "ratio" in row:
            ratio = row["ratio"]["deltas_per_s"]
            found.append(
                (f"burst: deltas/s ≥ 1.0x bare at C={concurrency}", f"{ratio:.2f}x", ratio >= 1.0)
            )
    for concurrency in (50, 500):
        row = _find(summaries, "yield", "thinwire", concurrency)
        if row and "ratio" in row:
            cpu = row["ratio"]["cpu_s_per_1k"]
            found.append(
                (
                    f"yield: server CPU per delta ≤ 1.5x bare-yield at C={concurrency}",
                    f"{cpu:.2f}x",
                    cpu <= 1.5,
                )
            )
            rate = row["ratio"]["deltas_per_s"]
            found.append(
                (
                    f"yield: deltas/s ≥ 0.7x bare-yield at C={concurrency}",
                    f"{rate:.2f}x",
                    rate >= 0.7,
                )
            )
    for workload in ("burst", "yield"):
        row = _find(summaries, workload, "thinwire", 1)
        if row and "overhead_ms" in row:
            overhead = row["overhead_ms"]
            found.append(
                (
                    f"{workload}: first-delta overhead ≤ 1 ms p50 over bare at C=1",
                    f"{overhead:+.2f} ms",
                    overhead <= 1,
                )
            )
    for workload, concurrency, ratios in websocket_rows(rows):
        ratio = median(ratios)
        found.append(
            (
                f"{workload}: WebSocket deltas/s ≥ 1.0x SSE at C={concurrency}",
                f"{ratio:.2f}x",
                ratio >= 1.0,
            )
        )
    return found


def targets(results: dict[str, Any]) -> list[Check]:
    """(target, measured, met) for each target the run has figures for."""
    found = stream_targets(results)
    capacity = results.get("capacity")
    if capacity:
        for row in capacity["rows"]:
            if row["server"] in ("thinwire", "thinwire-ws") and row["ratio"] is not None:
                found.append(
                    (
                        f"paced at 50 tokens/s: {row['server']} streams per core ≥ 0.8x bare's",
                        f"{row['ratio']:.2f}x",
                        row["ratio"] >= 0.8,
                    )
                )
        ws = next((r for r in capacity["rows"] if r["server"] == "thinwire-ws"), None)
        sse = next((r for r in capacity["rows"] if r["server"] == "thinwire"), None)
        if ws and sse and sse["sustained_median"]:
            ratio = ws["sustained_median"] / sse["sustained_median"]
            found.append(
                ("paced: WebSocket streams per core ≥ 1.0x SSE", f"{ratio:.2f}x", ratio >= 1.0)
            )
    model = results.get("model") or []
    for row in paired(model, baseline="thinwire-say"):
        if row["server"] == "thinwire-chat" and "ratio" in row:
            ratio = row["ratio"]["cpu_s_per_1k"]
            found.append(
                (
                    f"ChatAgent CPU per token ≤ 1.2x run.say at C={row['concurrency']}",
                    f"{ratio:.2f}x",
                    ratio <= 1.2,
                )
            )
    idle = next((r for r in results.get("idle") or [] if r["server"] == "thinwire"), None)
    if idle:
        kb = idle["kb_per_stream"]
        found.append(("≤ 50 KB server memory per idle stream", f"{kb:.1f} KB", kb <= 50))
    found += conversation_targets(results.get("conversations") or {})
    listing = results.get("listing")
    if listing:
        p99 = listing["p99_ms"]
        found.append(
            (
                f"a page of {listing['page']} of {listing['conversations']:,} conversations"
                " ≤ 5 ms p99",
                f"{p99:.2f} ms",
                p99 <= 5,
            )
        )
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


def conversation_targets(conversations: dict[str, Any]) -> list[Check]:
    """The targets of long conversations and the live-context cache."""
    found: list[Check] = []
    sizes = {int(k): v for k, v in (conversations.get("sizes") or {}).items()}
    if 1000 in sizes:
        p99 = sizes[1000]["resume_p99_ms"]
        found.append(("cold resume of 1,000 turns ≤ 3 ms p99", f"{p99:.2f} ms", p99 <= 3))
    if 10 in sizes and 5000 in sizes:
        for kind in ("cold", "hot"):
            for key, name in (("cpu_ms", "send CPU"), ("first_delta_p50_ms", "first delta")):
                ratio = sizes[5000][kind][key] / max(sizes[10][kind][key], 1e-9)
                found.append(
                    (
                        f"{kind} {name} at 5,000 turns ≤ 1.5x at 10",
                        f"{ratio:.2f}x",
                        ratio <= 1.5,
                    )
                )
    live = conversations.get("live") or {}
    if live and "error" not in live:
        grown = live["rss_after_mb"] - live["rss_before_mb"]
        ratio = grown / (live["cache_bytes"] / 2**20)
        found.append(
            ("RSS ≤ 1.25x the cache's byte bound + baseline", f"{ratio:.2f}x", ratio <= 1.25)
        )
    return found


def report(results: dict[str, Any]) -> str:
    lines: list[str] = []
    if results.get("streams"):
        lines += streams_tables(results)
    if results.get("capacity"):
        lines += capacity_table(results["capacity"])
    if results.get("model"):
        lines += model_table(results["model"])
    if results.get("conversations"):
        lines += conversations_table(results["conversations"])
    if results.get("listing"):
        lines += listing_table(results["listing"])
    if results.get("idle"):
        lines += idle_table(results["idle"])
    if results.get("client") or results.get("render"):
        lines += client_table(results.get("client") or {}, results.get("render") or {})
    found = targets(results)
    if found:
        lines += ["### Targets", "", "| target | measured | |", "|---|--:|---|"]
        for target, measured, met in found:
            lines.append(f"| {target} | {measured} | {'met' if met else '**missed**'} |")
    return "\n".join(lines)
