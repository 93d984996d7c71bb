from __future__ import annotations

import collections
import datetime
import enum
import math
import uuid
from typing import Any

import pytest

from thinwire.state import AgentState, StateValueError, WriteDenied


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


class Color(enum.StrEnum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "complaint"),
    [
        ({"a": [1, {"b": {1}}]}, "AgentState['k']['a'][1]['b'] is a set; AgentState holds JSON"),
        ({"a": {1: "x"}}, "AgentState['k']['a'] has a non-string key 1"),
        ({"a": ["\ud800"]}, "AgentState['k']['a'][0] is not valid Unicode (a lone surrogate)"),
        ({"\ud800": 1}, "a key of AgentState['k'] is not valid Unicode (a lone surrogate)"),
        ([0.5, math.inf], "AgentState['k'][1] is inf, which JSON cannot represent"),
        ((1, 2), "AgentState['k'] is a tuple; AgentState holds JSON values only (convert it"),
        # Said as a sentence says it: "an", and bytes named as what they are.
        ({"a": object()}, "AgentState['k']['a'] is an object; AgentState holds JSON"),
        (b"x", "AgentState['k'] is a bytes object; AgentState holds JSON"),
        (Ellipsis, "AgentState['k'] is an ellipsis; AgentState holds JSON"),
        (uuid.UUID(int=1), "AgentState['k'] is a UUID; AgentState holds JSON"),
    ],
)
def test_error_says_where_and_what(value: Any, complaint: str) -> None:
    with pytest.raises(StateValueError) as refused:
        AgentState()["k"] = value
    assert str(refused.value).startswith(complaint)


def test_subclasses_of_json_types_are_json() -> None:
    state = AgentState()
    state["k"] = {Color.RED: [Color.RED, True, collections.OrderedDict(n=1.5)]}
    assert state["k"] == {"red": ["red", True, {"n": 1.5}]}


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


def test_writable_keys_is_an_allow_list_for_every_write() -> None:
    state = AgentState({"secret": "s", "notes": []}, writable_keys={"notes"})
    state["notes"] = ["ok"]
    with pytest.raises(WriteDenied, match="'secret'"):
        state["secret"] = "changed"
    with pytest.raises(WriteDenied):
        state["new_key"] = 1
    with pytest.raises(WriteDenied):
        del state["secret"]
    assert state.to_json() == {"secret": "s", "notes": ["ok"]}


def test_update_all_writes_every_key_or_none() -> None:
    state = AgentState({"a": 1, "b": 2}, writable_keys={"a", "b"})
    with pytest.raises(WriteDenied) as denied:
        state.update_all({"a": 10, "c": 3, "d": 4})
    assert denied.value.keys == ["c", "d"]
    with pytest.raises(StateValueError):
        state.update_all({"a": 10, "b": {1, 2}})
    assert state.to_json() == {"a": 1, "b": 2}
    assert state.take_audit() == []


def test_every_write_is_audited_with_its_writer() -> None:
    clock = iter([10.0, 20.0, 30.0])
    state = AgentState(source="agent:demo", clock=lambda: next(clock))
    state["count"] = 1
    state.set("count", 2, source="operator:anna")
    del state["count"]
    assert [(e.key, e.value, e.time, e.source) for e in state.take_audit()] == [
        ("count", 1, 10.0, "agent:demo"),
        ("count", 2, 20.0, "operator:anna"),
        ("count", None, 30.0, "agent:demo"),
    ]
    assert state.take_audit() == []  # handed over once


def test_reads_are_copies_so_in_place_changes_cannot_skip_the_audit() -> None:
    state = AgentState({"items": [1]})
    state["items"].append(2)
    assert state["items"] == [1]
    written = [3]
    state["items"] = written
    written.append(4)
    assert state["items"] == [3]
    assert [e.value for e in state.take_audit()] == [[3]]


@pytest.mark.parametrize(
    ("value", "said"),
    [(7, "an int"), (b"x", "a bytes object"), (None, "None"), (["x"], "a list")],
)
def test_a_history_message_of_another_type_is_named_as_a_sentence_says_it(
    value: Any, said: str
) -> None:
    from thinwire.exchanges import checked

    with pytest.raises(StateValueError) as refused:
        checked(value, 1)
    assert str(refused.value).startswith(f"run.history[1] is {said}; run.history holds messages")


@pytest.mark.parametrize(
    "key", ["notes", "user.name", "user:ada", "ops@team", "k-1_2", "...", "x" * 128]
)
def test_a_key_name_is_what_a_url_segment_can_hold(key: str) -> None:
    state = AgentState()
    state[key] = 1
    assert state.to_json() == {key: 1}


@pytest.mark.parametrize(
    "key", ["", ".", "..", "a/b", "a b", "k?x", "k#x", "a%2Fb", "ключ", "\ud800", "x" * 129]
)
def test_a_key_the_operator_api_could_not_name_is_refused(key: str) -> None:
    state = AgentState({"kept": 1})
    with pytest.raises(StateValueError, match=r"^AgentState key .* is not a key name: 1 to 128"):
        state[key] = 1
    with pytest.raises(StateValueError, match=r"is not a key name"):
        state.update_all({"fine": 1, key: 2})  # every key, or none
    assert state.to_json() == {"kept": 1} and state.take_audit() == []


@pytest.mark.parametrize("key", ["", "a/b", "my key", "ключ", "x" * 129])
def test_a_key_that_is_no_name_is_refused_as_such_before_writable_keys(key: str) -> None:
    """What is wrong with it is its name, whatever the allow-list holds: a writer told
    "not writable" would look for a setting, not at the key."""
    state = AgentState(writable_keys=["notes"])
    with pytest.raises(StateValueError, match="is not a key name"):
        state.update_all({"notes": [], key: 1})
    with pytest.raises(StateValueError, match="is not a key name"):
        state[key] = 1
    assert state.to_json() == {} and state.take_audit() == []


def test_a_key_an_older_version_let_in_still_loads_and_can_be_deleted() -> None:
    state = AgentState({"a/b": 1, "notes": []})  # as a store kept it
    assert state["a/b"] == 1
    del state["a/b"]
    assert state.to_json() == {"notes": []}
    assert [(e.key, e.value) for e in state.take_audit()] == [("a/b", None)]


def test_a_value_over_the_size_limit_is_refused_naming_its_key() -> None:
    state = AgentState({"doc": "small"}, max_value_bytes=100)
    state["doc"] = "x" * 98  # 100 bytes as JSON, with its quotes
    state["numbers"] = [1] * 40 + [2] * 9  # 99 bytes
    with pytest.raises(StateValueError, match=r"^AgentState\['doc'\] is 101 bytes as JSON, over"):
        state["doc"] = "x" * 99
    with pytest.raises(StateValueError, match=r"is 102 bytes as JSON"):
        state["doc"] = "é" * 50  # two bytes each in UTF-8
    assert state["doc"] == "x" * 98 and len(state.take_audit()) == 2
    unlimited = AgentState()
    unlimited["doc"] = "x" * 10_000
