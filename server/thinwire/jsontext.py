"""JSON as text: the compact encoding everything stored and sent uses."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps"]


def dumps(value: Any) -> str:
    """Compact JSON; NaN and infinities are refused, as JSON has no place for them."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
