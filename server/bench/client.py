"""Client bundle sizes: packages/bench/src/sizes.mjs bundles each entry with esbuild."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from bench.procs import REPO

__all__ = ["run_sizes"]


def run_sizes() -> dict[str, Any]:
    script = REPO / "packages" / "bench" / "src" / "sizes.mjs"
    output = subprocess.run(
        ["node", str(script)], check=True, cwd=REPO, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(output)
    for size in result["sizes"]:
        if "gzipBytes" in size:
            print(f"  {size['name']:<36} {size['gzipBytes'] / 1024:7.1f} KB min+gzip", flush=True)
        else:
            print(f"  {size['name']:<36} failed: {size['error']}", flush=True)
    return result
