"""A conversation as one JSON document: everything the store holds of it, for a request
for a person's data (the operator API's `…/export`).

Built from the store's own reads — the record, then every exchange of every line, then
the audit trail — a page at a time, and streamed as it is read: a conversation of
thousands of exchanges costs the server a page of them, however long it is. Each
exchange's messages and turns are sent as the text the store keeps, never decoded.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from thinwire import wire
from thinwire.branches import Position
from thinwire.jsontext import dumps
from thinwire.records import ContextRecord
from thinwire.stores import AuditEntry, Store

__all__ = ["entry_json", "export_document"]


def entry_json(entry: AuditEntry, seq: int) -> dict[str, Any]:
    """An audit entry as the operator API shows it, numbered as in its trail."""
    return {
        "seq": seq,
        "key": entry.key,
        "value": entry.value,
        "time": entry.time,
        "source": entry.source,
        "version": entry.version,
        "runId": entry.run_id,
    }


def record_json(record: ContextRecord) -> dict[str, Any]:
    """What the record holds besides its exchanges and its run's internals: what it is,
    whose, its AgentState and usage, and the question it waits on (its public part)."""
    asked = record.pending_interrupt
    return {
        "exportedAt": time.time(),
        "contextId": record.id,
        "agent": record.agent,
        "owner": record.owner,
        "version": record.version,
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
        "status": record.status,
        "title": record.title,
        "state": record.state,
        "usage": record.usage,
        "pendingInterrupt": (
            None
            if asked is None
            else wire.InterruptRequest.model_validate(asked).model_dump(by_alias=True, mode="json")
        ),
        "preamble": record.preamble,
    }


def every_exchange(record: ContextRecord) -> Iterator[Position]:
    """Every exchange of every line, line by line, each from its first depth."""
    for line, spec in sorted(record.lines.lines.items()):
        for depth in range(spec.start, spec.tail + 1):
            yield Position(line, depth)


async def export_document(store: Store, record: ContextRecord, page: int) -> AsyncIterator[bytes]:
    """The document's bytes, as read: `record` (as the store loaded it, without its
    exchanges), then its exchanges and its audit trail, `page` at a time. An exchange
    the store no longer has (a clear or a forget since the record was read) is left
    out."""
    head = dumps(record_json(record))
    yield f'{head[:-1]},"exchanges":['.encode()
    lines, first = record.lines, True
    positions = every_exchange(record)
    while chunk := list(itertools.islice(positions, page)):
        found = await store.load_exchanges(record.id, chunk)
        for exchange in sorted(found, key=lambda e: e.position):
            where = exchange.position
            fields = dumps(
                {
                    "line": where.line,
                    "depth": where.depth,
                    "parentLine": lines.parent_line(where),
                    "shown": lines.on_branch(where),
                }
            )
            text = (
                f'{"" if first else ","}{fields[:-1]},"messages":{exchange.messages_json()},'
                f'"turns":{exchange.turns_json()}}}'
            )
            first = False
            yield text.encode()
    yield b'],"audit":['
    after = 0
    while True:
        read = await store.audit_page(record.id, limit=page, after=after)
        if read.entries:
            entries = ",".join(dumps(entry_json(entry, seq)) for seq, entry in read.entries)
            yield f"{',' if after else ''}{entries}".encode()
            after = read.entries[-1][0]
        if not read.more:
            break
    yield b"]}"
