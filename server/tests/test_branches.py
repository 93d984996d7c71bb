"""Branches and exchanges: the stored form of a conversation, checked against a plain
tree of messages, and the history a run reads."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thinwire.branches import Lines, Page, Position, parse_turn_id, turn_id
from thinwire.errors import Conflict, NotFound, StateValueError
from thinwire.exchanges import Exchange, History
from thinwire.records import ContextRecord, branch_turns, json_array


@dataclass
class Node:
    """The plain model: an exchange knows its parent and children; `next` is the child
    a send made after it (the rest are forks)."""

    text: str
    parent: Node | None
    position: Position
    #: When it was made, and whether it starts a branch of its own (a fork, or the first
    #: exchange of all).
    made: int = 0
    forked: bool = False
    children: list[Node] = field(default_factory=list)
    next: Node | None = None

    def path(self) -> list[Node]:
        node: Node | None = self
        path = []
        while node is not None:
            path.append(node)
            node = node.parent
        return path[::-1]


# An operation: ("send",), ("fork", which exchange of the branch), ("show", which
# exchange, which sibling).
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("send")),
        st.tuples(st.just("fork"), st.integers(0, 50)),
        st.tuples(st.just("show"), st.integers(0, 50), st.integers(0, 5)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(OPERATIONS)
def test_a_record_shows_what_a_plain_tree_would(operations: list[tuple[int | str, ...]]) -> None:
    record = ContextRecord(id="ctx-1", agent="a", owner="o", preamble=[{"role": "system"}])
    roots: list[Node] = []
    leaf: Node | None = None

    def siblings_of(node: Node) -> list[Node]:
        return node.parent.children if node.parent else roots

    for n, operation in enumerate(operations):
        text = f"m{n}"
        path = leaf.path() if leaf else []
        if operation[0] == "show" and path:
            at = int(operation[1]) % len(path)
            siblings = siblings_of(path[at])
            which = int(operation[2]) % len(siblings)
            record.show(record.lines.siblings(list(record.lines.positions())[at])[which])
            # The latest branch through the sibling: from the fork made last below it
            # (or from the sibling itself), on to the end of its sends.
            chosen = siblings[which]
            leaf = max(
                [node for node in walk(chosen)[1:] if node.forked] or [chosen],
                key=lambda node: node.made,
            )
            while leaf.next is not None:
                leaf = leaf.next
            record.recount()
        else:
            forking = operation[0] == "fork" and bool(path)
            at = int(operation[1]) % len(path) if forking else len(path)
            beside = list(record.lines.positions())[at] if forking else None
            record.start_run(f"r{n}", text, fork=beside)
            record.end_turn("end", text.upper())
            parent = path[at].parent if forking else leaf
            assert record.lines.leaf is not None
            node = Node(text, parent, record.lines.leaf, made=n, forked=forking or not parent)
            (parent.children if parent else roots).append(node)
            if parent is not None and not forking:
                parent.next = node
            leaf = node
        expected = leaf.path() if leaf else []
        turns = record.transcript
        shown = [t["text"] for t in turns if t["role"] == "user"]
        assert shown == [node.text for node in expected]
        assert [m["content"] for m in record.history if m["role"] == "user"] == shown
        forks = [(len(siblings_of(node)), siblings_of(node).index(node)) for node in expected]
        assert [(t["siblings"], t["siblingIndex"]) for t in turns[::2]] == forks
        assert record.turn_count == len(turns) == 2 * len(expected)
        ids = [t["id"] for t in turns]
        assert len(set(ids)) == len(ids)
        # Pages: the last `limit` exchanges of the branch shown, and of the branch leading
        # to any exchange of the tree (its ancestors), with siblings told as above.
        limit = n % 4 + 1
        assert page_of(record, Page(limit)) == (turns[-2 * limit :], len(expected) > limit)
        assert page_of(record, Page()) == (turns, False)
        everything = [node for root in roots for node in walk(root)]
        for node in everything:
            ancestors = node.path()[:-1]
            page, earlier = page_of(record, Page(limit, node.position))
            kept = ancestors[-limit:]
            assert [t["text"] for t in page if t["role"] == "user"] == [a.text for a in kept]
            forks = [(len(siblings_of(a)), siblings_of(a).index(a)) for a in kept]
            assert [(t["siblings"], t["siblingIndex"]) for t in page[::2]] == forks
            assert earlier == (len(ancestors) > limit)
        gone = Position(record.lines.next_line, 0)
        assert record.lines.window(Page(1, gone)) is None
        # A message after an exchange goes on its branch while nothing follows it.
        for node in everything:
            if node.children:
                with pytest.raises(Conflict) as refused:
                    record.lines.check_ends_branch(node.position)
                assert refused.value.code == "branch_moved"
            else:
                record.lines.check_ends_branch(node.position)
        for never in (gone, Position(0, len(everything) + 1)):
            with pytest.raises(NotFound):
                record.lines.check_ends_branch(never)


def walk(node: Node) -> list[Node]:
    return [node, *(n for child in node.children for n in walk(child))]


def page_of(record: ContextRecord, page: Page) -> tuple[list[dict[str, object]], bool]:
    """The turns of a page, from the exchanges in hand, and whether any precede it."""
    window = record.lines.window(page)
    assert window is not None
    texts = [record.exchanges[p].turns_json().encode() for p in window.positions()]
    return json.loads(json_array(branch_turns(window, texts))), window.has_earlier


def test_turn_ids_name_their_exchange() -> None:
    position = Position(0x12, 0x3456)
    assert turn_id(position, "user", 0) == "turn-001200003456-u0"
    assert turn_id(position, "assistant", 3) == "turn-001200003456-a3"
    assert parse_turn_id("turn-001200003456-a3") == (position, "a", 3)
    for bad in ("turn-1", "turn-001200003456-x0", "turn-00120000345g-u0", ""):
        with pytest.raises(NotFound):
            parse_turn_id(bad)


def test_lines_store_a_fork_without_copying_its_parents() -> None:
    lines = Lines()
    for _ in range(1000):
        lines.append()
    lines.fork_beside(Position(0, 500))
    assert len(lines.lines) == 2 and len(lines.path()) == 2  # two segments, not 501 rows
    assert lines.depth == 501
    restored = Lines.from_json(json.loads(json.dumps(lines.to_json())))
    assert list(restored.positions()) == list(lines.positions())


def history_of(*exchanges: list[dict[str, str]]) -> History:
    held = [
        Exchange(Position(0, n), messages_json=json.dumps(messages), size=len(messages))
        for n, messages in enumerate(exchanges)
    ]
    return History([{"role": "system", "content": "s"}], held)


def test_a_history_reads_from_the_end_without_decoding_the_rest() -> None:
    history = history_of(
        *(
            [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]
            for n in range(100)
        )
    )
    assert len(history) == 201
    assert history[-1]["content"] == "a99" and history[-3]["content"] == "a98"
    assert next(m for m in reversed(history) if m["content"] == "q97")
    decoded = [e.position.depth for e in history.exchanges if e._messages is not None]
    assert decoded == [97, 98, 99]
    assert history[0]["content"] == "s" and history[1]["content"] == "q0"
    assert history[49:51] == [
        {"role": "user", "content": "q24"},
        {"role": "assistant", "content": "a24"},
    ]


def test_only_the_running_exchange_of_a_history_changes() -> None:
    history = history_of([{"role": "user", "content": "old"}], [{"role": "user", "content": "new"}])
    history.append({"role": "tool", "content": "t"})
    history.insert(len(history) - 1, {"role": "note", "content": "n"})
    del history[-1]
    assert [m["content"] for m in history] == ["s", "old", "new", "n"]
    assert history.exchanges[1].changed and not history.exchanges[0].changed
    for change in (
        lambda: history.__setitem__(1, {"role": "user", "content": "rewritten"}),
        lambda: history.__delitem__(0),
        lambda: history.insert(1, {"role": "user"}),
        lambda: history.__setitem__(slice(0, 1), []),
    ):
        with pytest.raises(TypeError):
            change()
    assert [m["content"] for m in history] == ["s", "old", "new", "n"]


ADDS = {  # every way a message gets into a history, and the index it would take
    "append": (lambda history, message: history.append(message), 3),
    "insert": (lambda history, message: history.insert(len(history), message), 3),
    "insert before": (lambda history, message: history.insert(-1, message), 2),
    "extend": (lambda history, message: history.extend([message]), 3),
    "+=": (lambda history, message: history.__iadd__([message]), 3),
    "assign": (lambda history, message: history.__setitem__(-1, message), 2),
}


@pytest.mark.parametrize("add", sorted(ADDS))
@pytest.mark.parametrize(
    ("message", "where", "kind"),
    [
        ({"role": "note", "content": {1, 2}}, "['content']", "a set"),
        ({"role": "note", "at": datetime.date(2026, 1, 1)}, "['at']", "a date"),
        ({"role": "note", "pair": (1, 2)}, "['pair']", "a tuple"),
        ({"role": "note", "content": [b"bytes"]}, "['content'][0]", "a bytes object"),
        ("a note", "", "a str"),
        (["role", "note"], "", "a list"),
        (7, "", "an int"),
    ],
)
def test_a_message_that_is_not_a_json_object_is_refused_however_it_is_added(
    add: str, message: Any, where: str, kind: str
) -> None:
    history = history_of([{"role": "user", "content": "old"}], [{"role": "user", "content": "new"}])
    change, index = ADDS[add]
    with pytest.raises(StateValueError) as refused:
        change(history, message)
    text = str(refused.value)
    assert text.startswith(f"run.history[{index}]{where} is {kind}; run.history holds ")
    assert "AgentState" not in text and isinstance(refused.value, TypeError)
    assert [m["content"] for m in history] == ["s", "old", "new"]
    assert not history.exchanges[1].changed  # nothing was written


def test_a_message_of_json_values_is_added_as_it_is() -> None:
    history = history_of([{"role": "user", "content": "new"}])
    note = {"role": "note", "content": {"n": [1, 2.5, None, True, "é"]}}
    history.append(note)
    assert history[-1] is note and history.exchanges[0].changed


def test_a_record_counts_turns_and_weighs_what_it_holds_without_decoding() -> None:
    record = ContextRecord(id="ctx-1", agent="a", owner="o")
    for n in range(50):
        record.start_run(f"r{n}", f'question {n} with "role":"quotes"')
        record.end_turn("end", f"answer {n}")
    record.saved()
    light = record.weight
    assert all(e._turns is None for e in record.exchanges.values())
    record.recount()
    assert record.turn_count == 100 and record.preview == "answer 49"
    assert sum(e._turns is not None for e in record.exchanges.values()) == 1  # the last
    record.start_run("r-big", "x" * 100_000)
    record.end_turn("end", "ok")
    record.saved()
    assert record.weight - light >= 100_000


def test_titles_rank_user_over_agent_over_the_first_message() -> None:
    record = ContextRecord(id="ctx-1", agent="a", owner="o")
    record.start_run("r1", "the first message")
    assert (record.title, record.title_source) == ("the first message", "auto")
    record.name("the agent's", "agent")
    record.name("another first message", "auto")
    assert record.title == "the agent's"
    record.name("the user's", "user")
    record.name("the agent's again", "agent")
    assert (record.title, record.title_source) == ("the user's", "user")
