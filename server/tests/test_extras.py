"""The core installs no framework: importing thinwire imports none, and an adapter used
without its extra says which to install."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

#: Each adapter: its module, the packages its extra brings, the extra.
ADAPTERS = [
    ("thinwire.models.pydantic_ai", ("pydantic_ai",), "pydantic-ai"),
    ("thinwire.models.langgraph", ("langgraph", "langchain_core"), "langgraph"),
    ("thinwire.models.strands", ("strands",), "strands"),
]


def test_importing_thinwire_imports_no_framework() -> None:
    frameworks = sorted({package for _, packages, _ in ADAPTERS for package in packages})
    code = (
        "import sys, thinwire, thinwire.models; "
        f"print(sorted(m for m in {frameworks!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(("module", "packages", "extra"), ADAPTERS)
def test_without_its_extra_an_adapter_says_which_to_install(
    module: str, packages: tuple[str, ...], extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    importlib.import_module(module)  # so that removing it below is a change
    for name in [n for n in sys.modules if n.split(".")[0] in packages]:
        monkeypatch.setitem(sys.modules, name, None)  # as if they were not installed
    monkeypatch.delitem(sys.modules, module)
    with pytest.raises(ImportError, match=rf'pip install "thinwire\[{extra}\]"'):
        importlib.import_module(module)
