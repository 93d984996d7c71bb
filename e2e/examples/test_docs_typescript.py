"""Every ```ts and ```tsx block of the docs compiles, as a reader pasting it into a stock
Vite + React + TypeScript project would find: strict, against the installed tarballs, in
the installed examples/vite-app. The declarations are checked too (no skipLibCheck).

A block that is not meant to compile on its own (a fragment, a continuation of the block
before it) is marked ```tsx sketch. A block another block imports is named in its info
string, ```tsx Approval.tsx, and written under that name beside the other blocks of its
page. (The ```python blocks run in server/tests/test_docs.py.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass

from userland import ROOT, prepared

PAGES = [
    "README.md",
    *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")),
    "packages/client/README.md",
    "packages/react/README.md",
]
BLOCK = re.compile(
    r"^(?P<indent> *)```(?P<lang>tsx?)(?P<info>(?: [^\n]*)?)\n(?P<body>.*?)^(?P=indent)```",
    flags=re.MULTILINE | re.DOTALL,
)
ERROR = re.compile(r"^(?P<file>[^(\s]+)\((?P<line>\d+),(?P<column>\d+)\): (?P<message>.*)$")


@dataclass
class Block:
    page: str
    line: int  # of the block's first line of code in the page
    file: str  # where it is written, relative to the check's directory
    code: str


def blocks(page: str, text: str) -> list[Block]:
    """The blocks of a page to compile: its ts and tsx blocks but the sketches."""
    folder = page.removesuffix(".md").replace("/", "-")
    found = []
    for match in BLOCK.finditer(text):
        info = match["info"].split()
        if "sketch" in info:
            continue
        line = text.count("\n", 0, match.start("body")) + 1
        named = [word for word in info if re.fullmatch(r"[\w.-]+\.tsx?", word)]
        name = named[0] if named else f"line-{line}.{match['lang']}"
        found.append(Block(page, line, f"{folder}/{name}", textwrap.dedent(match["body"])))
    return found


def test_every_typescript_block_of_the_docs_compiles() -> None:
    app = prepared().example("vite-app")
    check = app / "docs-check"
    shutil.rmtree(check, ignore_errors=True)
    check.mkdir()
    compiled: list[Block] = []
    for page in PAGES:
        compiled += blocks(page, (ROOT / page).read_text(encoding="utf-8"))
    for block in compiled:
        path = check / block.file
        path.parent.mkdir(parents=True, exist_ok=True)
        assert not path.exists(), f"{block.page}: two blocks named {path.name}"
        path.write_text(block.code, encoding="utf-8")
    config = {
        "extends": "../tsconfig.app.json",
        "compilerOptions": {"skipLibCheck": False},
        "include": ["."],
    }
    (check / "tsconfig.json").write_text(json.dumps(config))
    assert len(compiled) >= 10, "the blocks were not found: did the markers change?"

    done = subprocess.run(
        ["node_modules/.bin/tsc", "-p", "docs-check", "--pretty", "false"],
        cwd=app,
        capture_output=True,
        text=True,
        timeout=50,
    )
    by_file = {f"docs-check/{block.file}": block for block in compiled}
    errors = []
    for output in done.stdout.splitlines():
        error = ERROR.match(output)
        block = by_file.get(error["file"]) if error else None
        if error and block:
            where = f"{block.page}:{block.line + int(error['line']) - 1}"
            errors.append(f"{where}: {error['message']}")
        else:
            errors.append(output)
    found = "\n".join(errors) or done.stderr
    hint = "(a block not meant to compile on its own is marked ```tsx sketch)"
    assert done.returncode == 0 and not errors, f"{found}\n{hint}"


def test_blocks_are_found_named_indented_and_left_out_when_sketches() -> None:
    page = """Intro.

```tsx Approval.tsx
export const a = 1;
```

1. In a list:

   ```ts
   const b: number = 2;
   ```

```tsx sketch
useAgent();
```

```python
x = 1
```
"""
    found = blocks("docs/page.md", page)
    assert [(b.file, b.line, b.code) for b in found] == [
        ("docs-page/Approval.tsx", 4, "export const a = 1;\n"),
        ("docs-page/line-10.ts", 10, "const b: number = 2;\n"),
    ]
