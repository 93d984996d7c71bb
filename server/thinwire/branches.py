"""A conversation's branches: exchanges in lines, and the path from the first to the one
shown.

An *exchange* is one user message and what answered it (the run's messages, its public
turns). Exchanges form a tree: regenerating a reply or editing a message adds a sibling
beside an exchange instead of changing it. The tree is stored as *lines*: a line is a run
of exchanges at consecutive depths, each the parent of the next; every fork starts a new
line, whose first exchange's parent is in its parent line. So an exchange is addressed
by `(line, depth)`, appending is adding to the line's tail, a fork copies nothing, and
the path of a branch is a handful of line segments however long the conversation:

    line 0: d0 ─ d1 ─ d2 ─ d3 ─ d4           the first branch
    line 1:            └ d2 ─ d3             an edit of the message at depth 2
    line 2:                       └ d4       a regenerated last reply of line 0

The branch shown ends at the tail of one line (`leaf`); every line's tail ends a branch
(a fork starts beside an exchange, and the first exchange after one goes on its line, so
nothing follows a tail). A client names the last turn it shows when it adds to the
conversation: the addition goes on that branch, shown or not, unless the conversation went
on from it (`check_ends_branch`). Turn ids name their exchange:
`turn-{line:04x}{depth:08x}-u0` for the user's turn, `-a0`, `-a1`… for the replies
(whether one a client sends names a turn the exchange has, `turns.py` checks).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from thinwire.errors import Conflict, NotFound
from thinwire.wire import MAX_BRANCHES

__all__ = [
    "WHOLE",
    "Line",
    "Lines",
    "Page",
    "Position",
    "Segment",
    "Window",
    "branch_moved",
    "is_turn_id",
    "parse_turn_id",
    "turn_id",
]

TURN_ID = re.compile(r"turn-([0-9a-f]{4})([0-9a-f]{8})-([ua])([0-9]{1,4})")


class Position(NamedTuple):
    """An exchange: its line and its depth (0 for the first exchange). A tuple: positions
    key every exchange a conversation holds, and a tuple hashes in C."""

    line: int
    depth: int


@dataclass(frozen=True)
class Line:
    #: The line of the first exchange's parent; None for a line starting at depth 0.
    parent: int | None
    start: int
    #: The depth of its last exchange.
    tail: int

    def to_json(self) -> list[int | None]:
        return [self.parent, self.start, self.tail]


@dataclass(frozen=True)
class Segment:
    """Depths `start` to `end` (both included) of `line`, on a path."""

    line: int
    start: int
    end: int


class Page(NamedTuple):
    """Which exchanges of a transcript to read: the last `limit` (all of them when None)
    of the branch shown, or, with `before`, of the branch that leads to that exchange
    (its ancestors: the same whichever branch is shown since)."""

    limit: int | None = None
    before: Position | None = None
    #: The id of the turn a client named as `before`: the lines know its exchange, the
    #: server checks it names a turn of that exchange (`turns.exchange_of`).
    before_turn: str | None = None

    @classmethod
    def before_turn_id(cls, limit: int | None, turn_id: str) -> Page:
        """The page of the exchanges before the turn `turn_id` (its form checked)."""
        return cls(limit, parse_turn_id(turn_id)[0], turn_id)


#: The whole branch shown.
WHOLE = Page()


def reaching_back(page: Page, fork: int, depth: int, longest: int) -> Page:
    """`page` of a branch of `depth` exchanges just shown by switching the alternative at
    depth `fork`, lengthened to begin one exchange before the fork if `longest` exchanges
    reach it: what precedes the fork is the same on both branches, so a client that had
    read further back keeps what it read, and the exchange switched stays in its view.
    Further back, `page` as asked: the end of the branch, read back to the fork with
    `before` (a client shows a branch to its end, so a page starting at the fork could
    not end short of it)."""
    if page.limit is None or page.before is not None:
        return page
    wanted = depth - max(0, fork - 1)
    if wanted > longest:  # a longest page would not hold the fork either: the one asked for
        return page
    return page._replace(limit=max(page.limit, wanted))


@dataclass(frozen=True)
class Window:
    """The exchanges of a page: depths `start` on of the path `segments`, and for each
    depth among them with siblings, (how many, which one)."""

    segments: list[Segment]
    forks: dict[int, tuple[int, int]]
    start: int

    @property
    def has_earlier(self) -> bool:
        return self.start > 0

    def positions(self) -> Iterator[Position]:
        for segment in self.segments:
            for depth in range(segment.start, segment.end + 1):
                yield Position(segment.line, depth)


def turn_id(position: Position, role: str, index: int) -> str:
    return f"turn-{position.line:04x}{position.depth:08x}-{role[0]}{index}"


def is_turn_id(value: str) -> bool:
    """Whether `value` has a turn id's form (whether the conversation has it aside)."""
    return TURN_ID.fullmatch(value) is not None


def parse_turn_id(value: str) -> tuple[Position, str, int]:
    """The exchange a turn id names, its role ("u" or "a") and index; `turn_not_found`
    for anything else. Its form only: `turns.exchange_of` checks it names a turn."""
    match = TURN_ID.fullmatch(value)
    if match is None:
        raise NotFound("turn_not_found", "no such turn")
    line, depth, role, index = match.groups()
    return Position(int(line, 16), int(depth, 16)), role, int(index)


def branch_moved() -> Conflict:
    return Conflict(
        "branch_moved",
        "The conversation changed elsewhere (another tab added to it, or cleared it), so "
        "nothing was done. Look at what it holds now and try again.",
    )


class Lines:
    """The lines of one conversation and the branch shown: small, kept in its record."""

    def __init__(
        self,
        lines: Mapping[int, Line] | None = None,
        leaf: Position | None = None,
        next_line: int | None = None,
    ):
        self.lines: dict[int, Line] = dict(lines or {})
        #: The last exchange of the branch shown; None while the conversation is empty.
        self.leaf = leaf
        #: The number the next line gets. Never reused, not even after a clear: a turn id
        #: names one turn for the life of the conversation.
        self.next_line = max(self.lines, default=-1) + 1 if next_line is None else next_line

    # --- the path ---------------------------------------------------------------------

    def path(self, leaf: Position | None = None) -> list[Segment]:
        """The segments from depth 0 to `leaf` (the branch shown by default), in order."""
        leaf = leaf or self.leaf
        segments: list[Segment] = []
        line: int | None = None if leaf is None else leaf.line
        end = -1 if leaf is None else leaf.depth
        while line is not None:
            spec = self.lines[line]
            segments.append(Segment(line, spec.start, end))
            line, end = spec.parent, spec.start - 1
        return segments[::-1]

    def positions(self, leaf: Position | None = None, *, start: int = 0) -> Iterator[Position]:
        """The exchanges from depth 0 (or `start`) to `leaf` (the branch shown by default),
        in order."""
        for segment in self.path(leaf):
            for depth in range(max(start, segment.start), segment.end + 1):
                yield Position(segment.line, depth)

    @property
    def depth(self) -> int:
        """Exchanges on the branch shown."""
        return 0 if self.leaf is None else self.leaf.depth + 1

    def holds(self, position: Position) -> bool:
        """Whether an exchange of these lines is at `position`."""
        spec = self.lines.get(position.line)
        return spec is not None and spec.start <= position.depth <= spec.tail

    def dropped(self, position: Position) -> bool:
        """Whether `position` is on a line a clear dropped."""
        return position.line not in self.lines and position.line < self.next_line

    def on_branch(self, position: Position, leaf: Position | None = None) -> bool:
        """Whether `position` is on the branch to `leaf` (the one shown by default)."""
        return any(
            s.line == position.line and s.start <= position.depth <= s.end for s in self.path(leaf)
        )

    def check_ends_branch(self, position: Position) -> None:
        """Refuse to add to the branch ending with the exchange at `position` (the last a
        client shows) unless it still ends one: `branch_moved` when the conversation went
        on from it (an exchange follows it) or was cleared since, `turn_not_found` when it
        never had an exchange there."""
        if self.dropped(position):
            raise branch_moved()
        spec = self.lines.get(position.line)
        if spec is None or not spec.start <= position.depth <= spec.tail:
            raise NotFound("turn_not_found", "no such turn in this conversation")
        if position.depth < spec.tail:
            raise branch_moved()

    def parent_line(self, position: Position) -> int | None:
        """The line holding the parent of the exchange at `position`."""
        spec = self.lines[position.line]
        return position.line if position.depth > spec.start else spec.parent

    # --- siblings ---------------------------------------------------------------------

    def siblings(self, position: Position) -> list[Position]:
        """The exchanges sharing `position`'s parent, in the order they were made (the
        order of their lines) — `position` among them."""
        parent = self.parent_line(position)
        return [
            Position(line, position.depth)
            for line, spec in sorted(self.lines.items())
            if spec.start <= position.depth <= spec.tail
            and self.parent_line(Position(line, position.depth)) == parent
        ]

    def forks(self, leaf: Position | None = None, start: int = 0) -> dict[int, tuple[int, int]]:
        """For each depth from `start` of the branch to `leaf` (the one shown by default)
        with siblings: (how many, which one)."""
        found: dict[int, tuple[int, int]] = {}
        if len(self.lines) < 2:
            return found
        # Siblings share a parent, so all but one of them start a line: only the depths
        # where a line starts can have any.
        starts = sorted({spec.start for spec in self.lines.values()})
        for segment in self.path(leaf):
            for depth in starts:
                if max(start, segment.start) <= depth <= segment.end:
                    position = Position(segment.line, depth)
                    siblings = self.siblings(position)
                    if len(siblings) > 1:
                        found[depth] = (len(siblings), siblings.index(position))
        return found

    def window(self, page: Page = WHOLE) -> Window | None:
        """The exchanges of `page`; None when its `before` is no exchange of these lines."""
        leaf = self.leaf
        if page.before is not None:
            if not self.holds(page.before):
                return None
            parent = self.parent_line(page.before)  # None at depth 0 only
            leaf = None if parent is None else Position(parent, page.before.depth - 1)
        if leaf is None:
            return Window([], {}, 0)
        start = 0 if page.limit is None else max(0, leaf.depth + 1 - page.limit)
        segments = [
            Segment(s.line, max(s.start, start), s.end) for s in self.path(leaf) if s.end >= start
        ]
        return Window(segments, self.forks(leaf, start), start)

    # --- changes ----------------------------------------------------------------------

    def append(self) -> Position:
        """A new exchange after the leaf; it becomes the leaf."""
        if self.leaf is None:
            return self.fork(0, None)
        line = self.leaf.line
        spec = self.lines[line]
        assert spec.tail == self.leaf.depth, "the leaf is its line's tail"
        position = Position(line, spec.tail + 1)
        self.lines[line] = Line(spec.parent, spec.start, position.depth)
        self.leaf = position
        return position

    def fork(self, depth: int, parent: int | None) -> Position:
        """A new exchange at `depth` whose parent is in line `parent`, on a new line; it
        becomes the leaf."""
        line = self.next_line
        if line >= MAX_BRANCHES:  # a turn id could not name it
            raise Conflict(
                "too_many_branches",
                f"This conversation has made {MAX_BRANCHES} branches (its first message, "
                "each regeneration and edit, the first message after each clear), as many "
                "as one may; start a new conversation.",
            )
        self.next_line += 1
        self.lines[line] = Line(parent, depth, depth)
        self.leaf = Position(line, depth)
        return self.leaf

    def fork_beside(self, position: Position) -> Position:
        """A sibling of the exchange at `position` (a regenerated reply, an edit)."""
        return self.fork(position.depth, self.parent_line(position))

    def show(self, position: Position) -> None:
        """Show the latest branch through `position`: the tail of the line made last of
        those that pass through it (its own, or one forking after it) becomes the leaf."""
        tails = (Position(line, spec.tail) for line, spec in self.lines.items())
        self.leaf = max((t for t in tails if self.on_branch(position, t)), key=lambda t: t.line)

    def clear(self) -> None:
        self.lines, self.leaf = {}, None  # next_line goes on

    # --- storage ----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "lines": {str(line): spec.to_json() for line, spec in self.lines.items()},
            "leaf": None if self.leaf is None else [self.leaf.line, self.leaf.depth],
            "next": self.next_line,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Lines:
        if not data:
            return cls()
        lines = {int(line): Line(*spec) for line, spec in data["lines"].items()}
        leaf = data["leaf"]
        return cls(lines, None if leaf is None else Position(*leaf), data.get("next"))
