"""React commits per second while a fast stream renders in a real Chromium.

The page (packages/bench/src/render-page.jsx, bundled by esbuild) renders the turns of
`useAgent` and records the time of every commit of the chat component. The agent streams in
bursts, about 5,000 deltas a second; the figure is commits per second of streaming,
which the hook should hold to the display's frame rate however fast the deltas come.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench.procs import REPO, free_port, python_server, started
from bench.servers import expected_text

__all__ = ["chromium_path", "run_render"]

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    found = os.environ.get("THINWIRE_CHROMIUM") or shutil.which("chromium")
    if found is None and Path("/usr/bin/chromium").exists():
        found = "/usr/bin/chromium"
    return found


def build_page(out: Path) -> None:
    script = REPO / "packages" / "bench" / "src" / "build-page.mjs"
    subprocess.run(["node", str(script), str(out)], check=True, cwd=REPO, stdout=subprocess.DEVNULL)


async def measure(url: str, chromium: str, deltas: int, rounds: int) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=chromium, args=CHROMIUM_ARGS, headless=True
        )
        try:
            page = await browser.new_page()
            await page.goto(url)
            await page.wait_for_function("window.bench && window.bench.ready()")
            await page.evaluate("(n) => window.bench.run(n)", 500)  # warm-up
            runs = [
                await page.evaluate("(n) => window.bench.run(n)", deltas) for _ in range(rounds)
            ]
        finally:
            await browser.close()
    expected = len(expected_text(deltas))
    results = []
    for run in runs:
        seconds = (run["ended"] - run["began"]) / 1000
        streaming = [t for t in run["commits"] if run["began"] <= t <= run["ended"]]
        results.append(
            {
                "seconds": seconds,
                "deltas_per_s": deltas / seconds,
                "commits": len(streaming),
                "commits_per_s": len(streaming) / seconds,
                "ok": run["replyLength"] == expected and run["stopReason"] == "end",
            }
        )
    return {
        "deltas": deltas,
        "rounds": rounds,
        "failures": sum(not r["ok"] for r in results),
        "deltas_per_s": min(r["deltas_per_s"] for r in results),
        "commits_per_s": max(r["commits_per_s"] for r in results),
        "runs": results,
    }


def run_render(deltas: int, rounds: int) -> dict[str, Any]:
    chromium = chromium_path()
    if chromium is None:
        print("  render: no Chromium found (set THINWIRE_CHROMIUM); skipped", flush=True)
        return {"skipped": "no Chromium"}
    with tempfile.TemporaryDirectory(prefix="thinwire-bench-") as directory:
        page_dir = Path(directory) / "page"
        build_page(page_dir)
        port = free_port()
        argv = python_server("thinwire", port, "--data-dir", directory, "--page-dir", str(page_dir))
        with started("thinwire", argv, port):
            row = asyncio.run(measure(f"http://127.0.0.1:{port}/page/", chromium, deltas, rounds))
    print(
        f"  render: {row['commits_per_s']:.1f} React commits/s at {row['deltas_per_s']:,.0f}"
        f" deltas/s in Chromium (worst of {rounds}), failures {row['failures']}",
        flush=True,
    )
    return row
