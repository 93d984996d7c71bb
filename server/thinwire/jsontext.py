"""JSON as text: compact encoding, and a list held as its JSON text until it is used."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["JsonList", "dumps"]

EMPTY_ARRAY = re.compile(r"\[\s*\]")


def dumps(value: Any) -> str:
    """Compact JSON; NaN and infinities are refused, as JSON has no place for them."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


class JsonList:
    """A list of JSON values, held as the list or as its JSON text.

    Text is one object where the list is thousands (a dict per message), which is what
    matters between runs: the garbage collector visits every element of every live list
    on each full collection, and a store writes text anyway. The list is decoded the
    first time it is asked for, and is from then on the truth (the text is dropped, as
    the list may change)."""

    __slots__ = ("_items", "_text")

    def __init__(self, items: list[Any] | None = None, text: str | None = None) -> None:
        if items is None and text is None:
            items = []
        self._items = items
        self._text = None if items is not None else text

    @property
    def items(self) -> list[Any]:
        if self._items is None:
            assert self._text is not None
            self._items, self._text = json.loads(self._text), None
        return self._items

    def json(self) -> str:
        return dumps(self._items) if self._items is not None else str(self._text)

    def append(self, item: Any) -> None:
        """Add an item at the end; held as text, the text grows and stays undecoded."""
        if self._items is not None:
            self._items.append(item)
            return
        text = str(self._text).rstrip()
        if not text.endswith("]"):
            raise ValueError("a JsonList's text must be a JSON array")
        empty = EMPTY_ARRAY.fullmatch(text) is not None
        self._text = f"{text[:-1]}{'' if empty else ','}{dumps(item)}]"

    def compact(self) -> None:
        """Hold the text instead of the list (ValueError if it is not JSON)."""
        if self._items is not None:
            self._text, self._items = dumps(self._items), None

    @property
    def compacted(self) -> bool:
        return self._items is None
