"""Tools that generate the client's wire files from the server's source of truth.

Not part of the installed package: `make schema` runs `python -m codegen OUT_DIR`.
"""

from __future__ import annotations

from codegen.generate import REGENERATE, generate, main

__all__ = ["REGENERATE", "generate", "main"]
