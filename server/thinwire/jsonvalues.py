"""Plain JSON values: what the server keeps of an agent's (AgentState, `run.history`, a
tool's arguments and output, a step's result, an interrupt's payload).

A value JSON cannot represent exactly (datetime, set, bytes, tuple, NaN, an object, a
key that is not a string) is refused where the agent hands it over, with a sentence
saying where it is, never stringified on the way to storage.
"""

from __future__ import annotations

import math
from typing import Any

from thinwire.errors import StateValueError, quoted
from thinwire.jsontext import is_unicode

__all__ = ["a_value_of", "check_json", "copy_json"]

JSONValue = Any

#: Types a message names otherwise than "a"/"an" and their class's name.
SAID = {bytes: "a bytes object", type(None): "None"}


def a_value_of(value: object) -> str:
    """What `value` is, as a sentence says it: "an object", "a set", "a bytes object"
    (the article by the name's first letter: "a UUID", "a UserDict")."""
    kind = type(value)
    if kind in SAID:
        return SAID[kind]
    name = kind.__name__
    return f"{'an' if name[:1].lower() in 'aeio' else 'a'} {name}"


def check_json(
    value: object, path: str = "value", *, rule: str = "AgentState holds JSON values only"
) -> None:
    """Raise `StateValueError` unless `value` is plain JSON (dict keys must be strings, and
    text valid Unicode: UTF-8 cannot store a lone surrogate). The error names where in
    `path` the value is, and for a value of another type says `rule`: what holds it, and
    that it takes JSON only."""
    try:
        walk(value)
    except Refused as refused:
        where = path + "".join(reversed(refused.where))
        raise StateValueError(refused.say(where, rule)) from None


class Refused(Exception):
    """What `walk` found (`problem`, `value`), and where: the keys and indices it went
    through, innermost first, added as it unwinds — so a value that passes costs no path
    at all."""

    def __init__(self, problem: str, value: object) -> None:
        self.problem = problem
        self.value = value
        self.where: list[str] = []

    def say(self, path: str, rule: str) -> str:
        if self.problem == "text":
            return f"{path} is not valid Unicode (a lone surrogate)"
        if self.problem == "key text":
            return f"a key of {path} is not valid Unicode (a lone surrogate)"
        if self.problem == "key":
            return f"{path} has a non-string key {self.value!r}"
        if self.problem == "number":
            return f"{path} is {self.value!r}, which JSON cannot represent"
        return (
            f"{path} is {a_value_of(self.value)}; {rule} "
            "(convert it explicitly, e.g. a datetime to an ISO string)"
        )


def walk(value: Any) -> None:
    """Refuse what is not plain JSON in `value`: its exact types first, as nearly all
    values are, then their subclasses (a `StrEnum`, an `OrderedDict`)."""
    kind = type(value)
    if kind is str:
        if not (value.isascii() or is_unicode(value)):
            raise Refused("text", value)
    elif kind is dict:
        walk_dict(value)
    elif kind is list:
        walk_list(value)
    elif value is None or kind is int or kind is bool:
        return
    elif kind is float or isinstance(value, float):
        if not math.isfinite(value):
            raise Refused("number", value)
    elif isinstance(value, str):
        if not is_unicode(value):
            raise Refused("text", value)
    elif isinstance(value, dict):
        walk_dict(value)
    elif isinstance(value, list):
        walk_list(value)
    elif not isinstance(value, int):
        raise Refused("type", value)


def walk_dict(value: dict[Any, Any]) -> None:
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
            raise Refused("key", key)
        if not (key.isascii() or is_unicode(key)):
            raise Refused("key text", key)
        try:
            walk(item)
        except Refused as refused:
            refused.where.append(f"[{quoted(key)}]")
            raise


def walk_list(value: list[Any]) -> None:
    for index, item in enumerate(value):
        try:
            walk(item)
        except Refused as refused:
            refused.where.append(f"[{index}]")
            raise


def copy_json(value: JSONValue) -> JSONValue:
    """A deep copy of a value `check_json` accepted: its dicts and lists copied, its
    scalars (immutable) shared. A fraction of `copy.deepcopy`'s cost, which is paid
    several times a run (every save copies the state)."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value
