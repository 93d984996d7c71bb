"""Build hook: put the built demo page into the wheel as thinwire/demo_page.

The page is web/dist, built by `make build` (or here, with npm, when it is missing), so
`pip install thinwire && thinwire demo` serves a page anywhere. Editable installs use
web/dist of the checkout directly and need nothing from here.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PAGE = Path("web") / "dist"


class DemoPageHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root)
        page = root / PAGE
        if not (page / "index.html").is_file():
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError(
                    "the wheel ships the demo page, which is not built and cannot be: "
                    "run `make build` (it needs Node.js and npm) before building the wheel"
                )
            subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=root, check=True)
            subprocess.run([npm, "run", "build:web"], cwd=root, check=True)
        build_data["force_include"][str(page)] = "thinwire/demo_page"
