"""JSON as text: the compact encoding everything stored and sent uses."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["dumps", "encodable", "is_unicode", "replace_unencodable"]

#: One encoder for every call: `json.dumps` with options builds one per call (a fifth of
#: a small value's cost). Encoding keeps no state in it, so threads may share it.
_ENCODER = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))

#: A surrogate code point: in a str, one that pairs with nothing (Python keeps a pair as
#: the one character it makes).
SURROGATE = re.compile("[\ud800-\udfff]")


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


def encodable(value: object) -> bool:
    """Whether a store can write `value` (JSON, in UTF-8); cheap, as one encoding is."""
    try:
        return is_unicode(dumps(value))
    except (TypeError, ValueError, RecursionError):
        return False


def replace_unencodable(value: Any) -> Any:
    """`value` with each lone surrogate in its text, dict keys included, replaced by one
    U+FFFD, so that UTF-8 can carry it."""
    if isinstance(value, str):
        return value if is_unicode(value) else SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [replace_unencodable(item) for item in value]
    if isinstance(value, dict):
        return {replace_unencodable(key): replace_unencodable(item) for key, item in value.items()}
    return value
