"""Frames kept as spans: a flush of a run's frames is a handful of consecutive seqs
written together, so it becomes one row holding their JSON (an index entry and a B-tree
insert per flush instead of per frame, which was most of a run's cost). A span is cut
wherever the seqs, the run or the time change, so reads, trims and expiry stay exact per
frame."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from operator import attrgetter

from thinwire.stores.base import Event, RunEvents

__all__ = ["SEPARATOR", "expire", "insert", "read", "spans", "trim"]

#: Joins a span's frames: a control character, which valid JSON never holds unescaped,
#: so splitting on it cannot cut a frame (and is far cheaper than a JSON array).
SEPARATOR = "\x1e"


def spans(events: Sequence[Event]) -> Iterator[Sequence[Event]]:
    """Events in seq order, cut into runs of consecutive seqs of one run and one time."""
    if not events:
        return
    first = events[0]
    if [e.seq for e in events] == list(range(first.seq, first.seq + len(events))) and len(
        {(e.run_id, e.time) for e in events}
    ) == 1:
        yield events  # a flush: one span, checked at C speed
        return
    start = 0
    for index in range(1, len(events) + 1):
        if index == len(events) or not continues(events[index - 1], events[index]):
            yield events[start:index]
            start = index


def continues(previous: Event, event: Event) -> bool:
    return (
        event.seq == previous.seq + 1
        and event.run_id == previous.run_id
        and event.time == previous.time
    )


def join_frames(span: Sequence[Event]) -> str:
    frames = span.frames if isinstance(span, RunEvents) else [event.data for event in span]
    joined = SEPARATOR.join(frames)
    if joined.count(SEPARATOR) != len(span) - 1:
        raise ValueError("an event's data is not JSON: it holds a raw U+001E")
    return joined


def insert(connection: sqlite3.Connection, context_id: str, events: Sequence[Event]) -> None:
    """Keep `events`; a seq kept already stays as it is (a retried flush)."""
    if not events:
        return
    ordered: Sequence[Event]
    # A run's frames from its log, one span as they are: no event made to find it out.
    whole = isinstance(events, RunEvents) and events.consecutive
    if whole:
        ordered = events
    elif [e.seq for e in events] == list(range(events[0].seq, events[0].seq + len(events))):
        ordered = list(events)  # consecutive already
    else:  # each seq once (the first given), in order
        ordered = sorted({e.seq: e for e in reversed(events)}.values(), key=attrgetter("seq"))
    kept = connection.execute(
        "SELECT first_seq, last_seq FROM spans "
        "WHERE context_id = ? AND last_seq >= ? AND first_seq <= ?",
        (context_id, ordered[0].seq, ordered[-1].seq),
    ).fetchall()
    if kept:
        ordered = [e for e in ordered if not any(a <= e.seq <= b for a, b in kept)]
        whole = False
    connection.executemany(
        "INSERT INTO spans (context_id, last_seq, first_seq, run_id, time, frames) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [
            (context_id, span[-1].seq, span[0].seq, span[0].run_id, span[0].time, join_frames(span))
            for span in ([ordered] if whole else spans(ordered))
        ],
    )


def read(connection: sqlite3.Connection, context_id: str, after: int) -> list[Event]:
    """The kept frames with seq > `after`, in seq order."""
    rows = connection.execute(
        "SELECT first_seq, run_id, time, frames FROM spans "
        "WHERE context_id = ? AND last_seq > ? ORDER BY last_seq",
        (context_id, after),
    ).fetchall()
    return [
        Event(seq=seq, run_id=run_id, data=data, time=time)
        for first, run_id, time, frames in rows
        for seq, data in enumerate(frames.split(SEPARATOR), first)
        if seq > after
    ]


def trim(connection: sqlite3.Connection, context_id: str, before_seq: int) -> None:
    """Drop the frames with seq < `before_seq`, cutting a span that straddles it."""
    connection.execute(
        "DELETE FROM spans WHERE context_id = ? AND last_seq < ?", (context_id, before_seq)
    )
    straddling = connection.execute(
        "SELECT last_seq, first_seq, frames FROM spans "
        "WHERE context_id = ? AND first_seq < ? AND last_seq >= ?",
        (context_id, before_seq, before_seq),
    ).fetchall()
    for last, first, frames in straddling:
        kept = frames.split(SEPARATOR)[before_seq - first :]
        connection.execute(
            "UPDATE spans SET first_seq = ?, frames = ? WHERE context_id = ? AND last_seq = ?",
            (before_seq, SEPARATOR.join(kept), context_id, last),
        )


def expire(connection: sqlite3.Connection, before_time: float) -> int:
    """Drop the frames of every context kept since before `before_time`; how many."""
    (frames,) = connection.execute(
        "SELECT coalesce(sum(last_seq - first_seq + 1), 0) FROM spans WHERE time < ?",
        (before_time,),
    ).fetchone()
    connection.execute("DELETE FROM spans WHERE time < ?", (before_time,))
    return int(frames)
