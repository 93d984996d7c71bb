"""A conversation's history and transcript in `parts`: a save that only added to a list
appends what it added, not the whole text again, and a list of many parts is rewritten
as one now and then."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from thinwire.records import ContextRecord

__all__ = ["MAX_PARTS", "ListWrite", "list_writes", "read_lists", "write_lists"]

#: A list appended to this many times is rewritten as one part.
MAX_PARTS = 64


@dataclass(frozen=True)
class ListWrite:
    """What a save writes of one of the record's lists: its whole JSON `text`, or only
    `tail`, when the text is what is stored with `tail` added before the bracket."""

    name: str
    text: str
    tail: str | None


def list_writes(record: ContextRecord) -> list[ListWrite]:
    """Serialised before any transaction starts: a non-JSON value changes nothing."""
    writes = []
    for name, text in (
        ("history", record.history_json()),
        ("transcript", record.transcript_json()),
    ):
        stored = record.stored.get(name)
        tail = None
        if stored is not None and text.startswith(stored[:-1]) and text.endswith("]"):
            tail = text[len(stored) - 1 : -1]  # what was added before the bracket
        writes.append(ListWrite(name, text, tail))
    return writes


def write_lists(connection: sqlite3.Connection, context_id: str, lists: list[ListWrite]) -> None:
    for write in lists:
        if write.tail == "":
            continue  # unchanged
        if write.tail is not None:
            (parts,) = connection.execute(
                "SELECT count(*) FROM parts WHERE context_id = ? AND list = ?",
                (context_id, write.name),
            ).fetchone()
            if 0 < parts < MAX_PARTS:
                connection.execute(
                    "INSERT INTO parts (context_id, list, seq, text) VALUES (?, ?, ?, ?)",
                    (context_id, write.name, parts, write.tail),
                )
                continue
        connection.execute(
            "DELETE FROM parts WHERE context_id = ? AND list = ?", (context_id, write.name)
        )
        connection.execute(
            "INSERT INTO parts (context_id, list, seq, text) VALUES (?, ?, 0, ?)",
            (context_id, write.name, write.text[:-1]),
        )


def read_lists(connection: sqlite3.Connection, context_id: str, *names: str) -> dict[str, str]:
    """The lists kept in parts (all, or those named), as JSON text."""
    query = "SELECT list, text FROM parts WHERE context_id = ?"
    parameters: list[str] = [context_id]
    if names:
        query += f" AND list IN ({', '.join('?' * len(names))})"
        parameters += names
    texts: dict[str, list[str]] = {}
    for name, text in connection.execute(query + " ORDER BY list, seq", parameters):
        texts.setdefault(name, []).append(text)
    return {name: "".join(parts) + "]" for name, parts in texts.items()}
