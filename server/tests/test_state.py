from __future__ import annotations

import datetime
import math
from typing import Any

import pytest

from thinwire.state import AgentState, StateValueError


@pytest.mark.parametrize(
    "value",
    [None, True, 0, -3, 1.5, "text", [], [1, "a", None], {"a": {"b": [1, 2.5, False]}}],
)
def test_json_values_are_accepted(value: Any) -> None:
    state = AgentState()
    state["key"] = value
    assert state["key"] == value


@pytest.mark.parametrize(
    "value",
    [
        datetime.datetime(2026, 1, 1),
        {1, 2},
        b"bytes",
        (1, 2),
        object(),
        math.nan,
        math.inf,
        {1: "non-string key"},
        {"nested": [datetime.date(2026, 1, 1)]},
    ],
)
def test_non_json_values_are_refused_not_stringified(value: Any) -> None:
    state = AgentState({"key": "before"})
    with pytest.raises(StateValueError):
        state["key"] = value
    assert state["key"] == "before"


def test_error_names_the_offending_path() -> None:
    with pytest.raises(StateValueError, match=r"\['when'\]"):
        AgentState()["plan"] = {"when": datetime.date(2026, 1, 1)}


def test_initial_state_is_copied_per_context() -> None:
    initial = {"items": [1]}
    first, second = AgentState(initial), AgentState(initial)
    first["items"].append(2)
    assert second["items"] == [1] and initial["items"] == [1]


def test_initial_state_is_checked_too() -> None:
    with pytest.raises(StateValueError):
        AgentState({"when": datetime.datetime(2026, 1, 1)})


def test_repr_shows_keys_not_values() -> None:
    assert "hidden-value" not in repr(AgentState({"secret": "hidden-value"}))
