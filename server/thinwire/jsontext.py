"""JSON as text: the compact encoding everything stored and sent uses."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["dumps", "is_unicode"]

#: One encoder for every call: `json.dumps` with options builds one per call (a fifth of
#: a small value's cost). Encoding keeps no state in it, so threads may share it.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON; NaN and infinities are refused, as JSON has no place for them."""
    return _ENCODER.encode(value)


def is_unicode(text: str) -> bool:
    """Whether UTF-8 can carry `text`: it holds no lone surrogate (which JSON's `\\ud800`
    escapes decode to, and which no store or response can encode)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
