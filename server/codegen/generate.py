"""Every generated client file: written, or with --check compared.

python -m codegen OUT_DIR          # write wire.schema.json, wire.ts and the fixtures
python -m codegen OUT_DIR --check  # exit 1 when the files on disk drift
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from codegen.conformance import demo_run
from codegen.typescript import json_schema, published_schema, typescript

__all__ = ["REGENERATE", "generate", "main"]

REGENERATE = "make schema"


def generate() -> dict[str, str]:
    """File name -> content of every generated file."""
    schema = json_schema()
    return {
        "wire.schema.json": json.dumps(published_schema(schema), indent=2, ensure_ascii=False)
        + "\n",
        "wire.ts": typescript(schema),
        **demo_run(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codegen")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--check", action="store_true", help="fail when files drift")
    args = parser.parse_args(argv)
    drifted = []
    for name, content in generate().items():
        path = args.out_dir / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != content:
                drifted.append(str(path))
        elif not path.exists() or path.read_text(encoding="utf-8") != content:
            # Untouched when unchanged: its time is what make judges the builds after it by.
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    if drifted:
        print(f"wire types drift from server/thinwire/wire.py: {', '.join(drifted)}")
        print(f"run `{REGENERATE}` and commit the result")
        return 1
    return 0
