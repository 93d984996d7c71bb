"""AgentState: a per-context key-value store whose values must be JSON.

A value that JSON cannot represent exactly (datetime, set, bytes, tuple, NaN, an object)
is refused when it is written, never stringified on the way to storage.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

__all__ = ["AgentState", "StateValueError", "check_json"]

JSONValue = Any


class StateValueError(TypeError):
    """A value written to AgentState is not plain JSON."""


def check_json(value: object, path: str = "value") -> None:
    """Raise `StateValueError` unless `value` is plain JSON (dict keys must be strings)."""
    if value is None or isinstance(value, bool | str):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StateValueError(f"{path} is {value!r}, which JSON cannot represent")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            check_json(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise StateValueError(f"{path} has a non-string key {key!r}")
            check_json(item, f"{path}[{key!r}]")
        return
    raise StateValueError(
        f"{path} is a {type(value).__name__}; AgentState holds JSON values only "
        "(convert it explicitly, e.g. a datetime to an ISO string)"
    )


class AgentState(MutableMapping[str, JSONValue]):
    """Server-only key-value state of one context. Never serialised onto the wire."""

    def __init__(self, initial: Mapping[str, JSONValue] | None = None) -> None:
        self._data: dict[str, JSONValue] = {}
        for key, value in (initial or {}).items():
            # A copy: contexts must never share mutable initial values.
            self[key] = copy.deepcopy(value)

    def __getitem__(self, key: str) -> JSONValue:
        return self._data[key]

    def __setitem__(self, key: str, value: JSONValue) -> None:
        if not isinstance(key, str):
            raise StateValueError(f"AgentState keys are strings, not {type(key).__name__}")
        check_json(value, f"AgentState[{key!r}]")
        self._data[key] = value

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"AgentState(keys={sorted(self._data)})"
