"""The test files the docs give a reader to save pass under pytest from the installed
wheel (`pip install "thinwire[openai,testing]"`, as the page says), in a project of their
own outside the checkout. Starlette's warning that its TestClient runs on the deprecated
httpx, not httpx2, fails them: the `testing` extra must bring what TestClient needs. (Every ```python block also runs in the checkout, in server/tests/test_docs.py.)
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest
from userland import ROOT, prepared

#: The docs' test files, by page: the blocks whose first line names the file.
TEST_FILES = {"docs/testing.md": ["tests/test_librarian.py"]}


def saved_file(page: str, name: str) -> str:
    """The ```python block of `page` that starts with `# <name>`."""
    text = (ROOT / page).read_text(encoding="utf-8")
    found = [
        textwrap.dedent(body)
        for body in re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
        if textwrap.dedent(body).startswith(f"# {name}\n")
    ]
    assert len(found) == 1, f"{page}: {len(found)} blocks start with # {name}"
    return found[0]


@pytest.mark.parametrize(
    ("page", "name"), [(page, name) for page, names in TEST_FILES.items() for name in names]
)
def test_the_docs_test_file_passes_from_the_wheel(page: str, name: str, tmp_path: Path) -> None:
    land = prepared()
    target = tmp_path / name
    target.parent.mkdir(parents=True)
    target.write_text(saved_file(page, name), encoding="utf-8")
    done = subprocess.run(
        [
            *(land.bin("python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", name),
            *("-W", "error:Using `httpx`:DeprecationWarning"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b1 passed\b", done.stdout), done.stdout
