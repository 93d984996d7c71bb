"""An in-memory store for tests and throwaway demos. Nothing survives the process.

Records and exchanges are kept as JSON text, so the memory store refuses and copies
exactly what a durable store would: no test passes here only because two objects were
aliased.
"""

from __future__ import annotations

import json
from bisect import bisect_left, insort
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from thinwire.branches import Position
from thinwire.errors import AlreadyExists, VersionConflict
from thinwire.exchanges import Exchange
from thinwire.jsontext import dumps
from thinwire.records import ContextRecord
from thinwire.stores.base import AuditEntry, Event, Store
from thinwire.stores.listing import Cursor, Summary

__all__ = ["MemoryStore"]


@dataclass
class Stored:
    agent: str
    owner: str
    version: int
    data: str
    summary: Summary
    #: position -> (messages JSON, turns JSON, size)
    exchanges: dict[Position, tuple[str, str, int]] = field(default_factory=dict)


class MemoryStore(Store):
    def __init__(self) -> None:
        self._records: dict[str, Stored] = {}
        self._audit: dict[str, list[str]] = {}
        self._events: dict[str, dict[int, Event]] = {}
        self._sends: dict[tuple[str, str], str] = {}
        #: Per owner and agent, `(updated_at, context_id)` of each conversation, sorted:
        #: the list's index, so a page costs the same with ten conversations or 10,000.
        self._lists: dict[tuple[str, str], list[tuple[float, str]]] = {}

    def describe(self) -> str:
        return "memory (gone when the process exits)"

    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        if record.id in self._records:
            raise AlreadyExists(record.id)
        self._write(record, 1, audit, {})
        for message_id in record.sends:
            self._sends[record.owner, message_id] = record.id

    async def load(self, context_id: str) -> ContextRecord | None:
        stored = self._records.get(context_id)
        if stored is None:
            return None
        return ContextRecord.from_json(
            id=context_id,
            agent=stored.agent,
            owner=stored.owner,
            version=stored.version,
            data=json.loads(stored.data),
        )

    async def load_exchanges(
        self, context_id: str, positions: Sequence[Position]
    ) -> list[Exchange]:
        stored = self._records.get(context_id)
        kept = stored.exchanges if stored else {}
        return [
            Exchange(p, messages_json=kept[p][0], turns_json=kept[p][1], size=kept[p][2])
            for p in positions
            if p in kept
        ]

    async def list_contexts(
        self, owner: str, agent: str, limit: int, after: Cursor | None = None
    ) -> list[Summary]:
        index = self._lists.get((owner, agent), [])
        end = (
            len(index)
            if after is None
            else bisect_left(index, (after.updated_at, after.context_id))
        )
        return [self._records[key[1]].summary for key in reversed(index[max(0, end - limit) : end])]

    async def save(
        self,
        record: ContextRecord,
        *,
        expected_version: int,
        audit: Sequence[AuditEntry] = (),
        events: Sequence[Event] = (),
        fence: int | None = None,
        trim_before: int | None = None,
    ) -> int:
        stored = self._records.get(record.id)
        actual = stored.version if stored else None
        if stored is None or actual != expected_version:
            raise VersionConflict(record.id, expected_version, actual)
        kept = {} if record.cleared else stored.exchanges
        version = self._write(record, expected_version + 1, audit, kept)
        self._keep(record.id, events)
        if trim_before is not None:
            await self.trim_events(record.id, trim_before)
        return version

    def _keep(self, context_id: str, events: Sequence[Event]) -> None:
        kept = self._events.setdefault(context_id, {})
        for event in events:
            kept.setdefault(event.seq, event)

    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        self._keep(context_id, events)

    async def read_events(self, context_id: str, after: int = 0) -> list[Event]:
        kept = self._events.get(context_id, {})
        return [kept[seq] for seq in sorted(kept) if seq > after]

    async def trim_events(self, context_id: str, before_seq: int) -> None:
        kept = self._events.get(context_id, {})
        for seq in [seq for seq in kept if seq < before_seq]:
            del kept[seq]

    async def expire_events(self, before_time: float) -> int:
        dropped = 0
        for kept in self._events.values():
            old = [seq for seq, event in kept.items() if event.time < before_time]
            for seq in old:
                del kept[seq]
            dropped += len(old)
        return dropped

    def _write(
        self,
        record: ContextRecord,
        version: int,
        audit: Sequence[AuditEntry],
        exchanges: dict[Position, tuple[str, str, int]],
    ) -> int:
        # Serialise everything before changing anything, so a bad value changes nothing.
        data = dumps(record.rest_json())
        changed = {
            e.position: (e.messages_json(), e.turns_json(), e.size)
            for e in record.exchanges.values()
            if e.changed or record.cleared or version == 1
        }
        entries = [encode_entry(replace(entry, version=version)) for entry in audit]
        self._unlist(record.id)
        insort(
            self._lists.setdefault((record.owner, record.agent), []), (record.updated_at, record.id)
        )
        self._records[record.id] = Stored(
            record.agent,
            record.owner,
            version,
            data,
            Summary.of(record),
            {**exchanges, **changed},
        )
        self._audit.setdefault(record.id, []).extend(entries)
        return version

    async def find_send(self, owner: str, message_id: str) -> str | None:
        context_id = self._sends.get((owner, message_id))
        return context_id if context_id in self._records else None

    def _unlist(self, context_id: str) -> None:
        stored = self._records.get(context_id)
        if stored is not None:
            index = self._lists[stored.owner, stored.agent]
            del index[bisect_left(index, (stored.summary.updated_at, context_id))]

    async def delete(self, context_id: str) -> bool:
        self._unlist(context_id)
        self._audit.pop(context_id, None)
        self._events.pop(context_id, None)
        for send in [send for send, created in self._sends.items() if created == context_id]:
            del self._sends[send]
        return self._records.pop(context_id, None) is not None

    async def audit(self, context_id: str, key: str | None = None) -> list[AuditEntry]:
        entries = [decode_entry(text) for text in self._audit.get(context_id, [])]
        return [entry for entry in entries if key is None or entry.key == key]


def encode_entry(entry: AuditEntry) -> str:
    return json.dumps(
        [entry.key, entry.value, entry.time, entry.source, entry.version, entry.run_id],
        allow_nan=False,
    )


def decode_entry(text: str) -> AuditEntry:
    return AuditEntry(*json.loads(text))
