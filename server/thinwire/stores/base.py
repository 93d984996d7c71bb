"""The store interface: where every conversation's memory lives between runs.

A store keeps one `ContextRecord` per context, an append-only audit trail of AgentState
writes, and the event log of each context's recent runs. Who may change a context, and
how a run on another process is reached, is the `Coordinator`'s business, not the
store's. The contract every implementation must meet (and the shared conformance suite
in `server/tests/test_stores.py` checks):

- `save` is compare-and-set on `version`: it lands whole, with its audit entries, or
  not at all, and a stale `expected_version` raises `VersionConflict` — never a silent
  overwrite.
- A crash at any point leaves the old version or the new one, nothing in between.
- Records and audit entries are plain JSON on the way in and out: what is loaded is
  equal to what was saved, never aliased to it.
- A record is loaded without its exchanges (`load`); `load_exchanges` reads the ones a
  run or a read needs, and `save` writes the exchanges that changed (all of them after
  a clear, which drops the others) with the record, in the same atomic step.
- `list_contexts` pages through an owner's conversations of an agent, the most recently
  updated first, from an index kept with every save; `load_transcript` reads the branch
  shown without the history.
- The audit trail is read whole (`audit`) or a page at a time (`audit_page`), its
  entries numbered from 1 in the order they were appended.
- `delete` removes every trace of a context: its record, its exchanges, its audit trail,
  its events, its place in the lists, the index of its sends.
- Events (the frames of a context's recent runs) are kept by seq, once each: appending
  an event again is a no-op, so a retried flush never duplicates a frame.
- `create` indexes the message ids of the new context's sends (`record.sends`) under its
  owner, in the same step, so a retried first send finds the conversation it created.
- A failure of the database itself surfaces as `StoreError`, never as the driver's own
  exception.

These map onto SQLite transactions and onto Redis scripts, so the same interface serves
one process or several replicas.
"""

from __future__ import annotations

import abc
import asyncio
import logging
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, overload

from thinwire.branches import WHOLE, Page, Position, Window
from thinwire.exchanges import Exchange
from thinwire.records import ContextRecord, TranscriptView, branch_turns
from thinwire.stores.listing import Cursor, Summary

if TYPE_CHECKING:
    from thinwire.coordination import Coordinator

__all__ = ["PROBE_CONTEXT", "AuditEntry", "AuditPage", "Event", "RunEvents", "Store"]

logger = logging.getLogger("thinwire.stores")

#: A context id no conversation has (not even the right form): what a readiness check
#: reads, and writes to when it probes whether the store takes writes.
PROBE_CONTEXT = "readiness-probe"

#: No exchanges in hand (`Store.window_turns`).
EMPTY: Mapping[Position, Exchange] = MappingProxyType({})


@dataclass(frozen=True)
class AuditEntry:
    """One AgentState write: which key, the value written, when, and by whom."""

    key: str
    value: Any
    time: float
    source: str
    #: The context version the write landed in.
    version: int = 0
    #: The run that wrote it (None for a write outside a run: an operator's, the
    #: initial state's).
    run_id: str | None = None


class AuditPage(NamedTuple):
    """A page of an audit trail: its entries, oldest first, each with its place in the
    context's whole trail (from 1), and whether more are beyond it, on the side read."""

    entries: list[tuple[int, AuditEntry]]
    more: bool


class Event(NamedTuple):
    """One frame as it went on the wire: its seq, its run and its JSON. A tuple: a flush
    makes one per frame, and a tuple is made in half a dataclass's time."""

    seq: int
    run_id: str
    data: str
    time: float


class RunEvents(Sequence[Event]):
    """Frames of one run with one time, as events made one by one as a store reads
    them. Made up front, a finished run's 200 frames would wait for their commit as 200
    tuples; under load tens of thousands wait at once, and every full collection of the
    garbage collector walks them (about a tenth of a second each, 500 runs finishing)."""

    __slots__ = ("frames", "run_id", "seqs", "time")

    def __init__(self, seqs: array[int], frames: list[str], run_id: str, time: float) -> None:
        self.seqs = seqs
        self.frames = frames
        self.run_id = run_id
        self.time = time

    def __len__(self) -> int:
        return len(self.frames)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> RunEvents: ...
    def __getitem__(self, index: int | slice) -> Event | RunEvents:
        if isinstance(index, slice):
            return RunEvents(self.seqs[index], self.frames[index], self.run_id, self.time)
        return Event(self.seqs[index], self.run_id, self.frames[index], self.time)

    def __iter__(self) -> Iterator[Event]:
        run_id, now = self.run_id, self.time
        for seq, data in zip(self.seqs, self.frames, strict=True):
            yield Event(seq, run_id, data, now)

    @property
    def consecutive(self) -> bool:
        """The seqs follow one another with no gap (a run's frames, nearly always)."""
        seqs = self.seqs
        return not seqs or seqs.tolist() == list(range(seqs[0], seqs[0] + len(seqs)))


class Store(abc.ABC):
    def coordinator(self, *, lease_ttl: float) -> Coordinator:
        """The coordinator that goes with this store: one for a store one process owns,
        unless the store is shared by replicas (see `thinwire.coordination`)."""
        from thinwire.coordination.local import LocalCoordinator

        return LocalCoordinator(lease_ttl=lease_ttl)

    def describe(self) -> str:
        """What the startup log says this store is: its kind and where it keeps things,
        never a credential."""
        return type(self).__name__

    async def open(self) -> None:  # noqa: B027 - optional for stores with nothing to do
        """Called once as the server starts, before any request: a store may check or move
        over what an earlier version stored."""

    @abc.abstractmethod
    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        """Store a new context at version 1; `AlreadyExists` if the id is taken."""

    @abc.abstractmethod
    async def load(self, context_id: str) -> ContextRecord | None:
        """The stored record without its exchanges, or None."""

    @abc.abstractmethod
    async def load_exchanges(
        self, context_id: str, positions: Sequence[Position]
    ) -> list[Exchange]:
        """The stored exchanges at these positions (those there are), as text."""

    async def load_branch(self, record: ContextRecord, last: int | None = None) -> None:
        """Bring the exchanges of the record's branch shown (its `last` ones only, when
        given) that are not in hand, as text (decoded only when read). One the store
        lost shows as an empty exchange rather than making the conversation unreadable."""
        missing = record.missing(last)
        found = await self.load_exchanges(record.id, missing) if missing else []
        lost = set(missing) - {exchange.position for exchange in found}
        if lost:
            log_lost(record.id, sorted(lost))
        record.held([*found, *(Exchange(position) for position in lost)], last)

    async def load_whole(self, context_id: str) -> ContextRecord | None:
        """The stored record with its branch shown in hand, or None."""
        record = await self.load(context_id)
        if record is not None:
            await self.load_branch(record)
        return record

    async def load_turns(
        self, context_id: str, positions: Sequence[Position]
    ) -> dict[Position, str]:
        """The public turns (JSON text) of the stored exchanges at these positions (those
        there are): a store that keeps them apart from the history reads only them."""
        found = await self.load_exchanges(context_id, positions)
        return {exchange.position: exchange.turns_json() for exchange in found}

    async def load_transcript(self, context_id: str, page: Page = WHOLE) -> TranscriptView | None:
        """A page of the conversation (the whole branch shown by default), as the public
        transcript, and what goes with it; or None. Reads the record without its
        exchanges, then the page's turns (`load_turns`)."""
        record = await self.load(context_id)
        if record is None:
            return None
        window = record.lines.window(page)
        turns = await self.window_turns(context_id, window) if window else []
        return TranscriptView.of(record, window, turns)

    async def window_turns(
        self, context_id: str, window: Window, held: Mapping[Position, Exchange] = EMPTY
    ) -> list[bytes]:
        """The public turns of `window` (`branch_turns`): of the exchanges `held` (a live
        record's, newer than the store's) as they are, of the others as stored."""
        positions = list(window.positions())
        missing = [p for p in positions if p not in held]
        stored = await self.load_turns(context_id, missing) if missing else {}
        lost = [p for p in missing if p not in stored]
        if lost:
            log_lost(context_id, lost)
        texts = [held[p].turns_json() if p in held else stored.get(p, "[]") for p in positions]
        return branch_turns(window, [text.encode() for text in texts])

    @abc.abstractmethod
    async def list_contexts(
        self, owner: str, agent: str, limit: int, after: Cursor | None = None
    ) -> list[Summary]:
        """`owner`'s conversations of `agent`, the most recently updated first, starting
        after `after`; at most `limit`."""

    @abc.abstractmethod
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
        """Replace the record if its stored version is `expected_version` (and, with
        `fence`, a token of this store's coordinator, if that token still holds the
        context's lease; a store one process owns has no one to fence out and ignores
        it); return the new version. With it land the record's changed exchanges (all of
        its exchanges, the others dropped, when `record.cleared`) and the audit entries
        and events, and the events before `trim_before` are dropped, in one atomic step."""

    @abc.abstractmethod
    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        """Keep these frames; a seq already kept is left as it is."""

    @abc.abstractmethod
    async def read_events(self, context_id: str, after: int = 0) -> list[Event]:
        """The kept frames with seq > `after`, in seq order."""

    @abc.abstractmethod
    async def trim_events(self, context_id: str, before_seq: int) -> None:
        """Drop the frames with seq < `before_seq`."""

    def keep_events_for(self, seconds: float) -> None:  # noqa: B027 - optional
        """The app's `event_ttl`, told when the app is made: a store that expires frames
        by itself (Redis) keeps them that long; the others are asked (`expire_events`)."""

    @abc.abstractmethod
    async def expire_events(self, before_time: float) -> int:
        """Drop frames of every context kept since before `before_time`; return how many.
        A shared store may expire whole logs by itself instead (and return 0)."""

    async def follow_events(self, context_id: str, after: int, timeout: float) -> list[Event]:
        """The kept frames with seq > `after`, waiting up to `timeout` seconds for one."""
        deadline = time.monotonic() + timeout
        while True:
            events = await self.read_events(context_id, after)
            if events or time.monotonic() >= deadline:
                return events
            await asyncio.sleep(0.05)

    @abc.abstractmethod
    async def find_send(self, owner: str, message_id: str) -> str | None:
        """The context `owner` created with a send of `message_id`, if any (for as long as
        the context lives; a shared store may forget it after `event_ttl`)."""

    async def version(self, context_id: str) -> int | None:
        """The stored version of the context, or None; a store may read less than `load`
        does for it."""
        record = await self.load(context_id)
        return None if record is None else record.version

    @abc.abstractmethod
    async def delete(self, context_id: str) -> bool:
        """Remove the context, its audit trail and its events; False if there was none."""

    @abc.abstractmethod
    async def audit(self, context_id: str, key: str | None = None) -> list[AuditEntry]:
        """The audit trail of a context (of one key), oldest first."""

    async def audit_page(
        self,
        context_id: str,
        *,
        limit: int,
        key: str | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> AuditPage:
        """A page of the audit trail (of one key's entries): the latest `limit` before the
        entry numbered `before` (by default, the latest of all), or, with `after`, the
        first `limit` after the one numbered `after`. Entries are numbered from 1 in the
        whole trail, every key's, so an entry has one number in every page. By default
        read from the whole trail (`audit`); a store that can read a page alone does."""
        numbered = enumerate(await self.audit(context_id), 1)
        trail = [(n, entry) for n, entry in numbered if key is None or entry.key == key]
        if after is not None:
            rest = [(n, entry) for n, entry in trail if n > after]
            return AuditPage(rest[:limit], len(rest) > limit)
        rest = [(n, entry) for n, entry in trail if before is None or n < before]
        return AuditPage(rest[-limit:], len(rest) > limit)  # limit: 1 or more

    async def probe_write(self) -> None:
        """Write something of no conversation's and take it back: `StoreError` unless the
        store takes writes. What a readiness check asks, at most once a second, after a
        write was refused (a full disk): by default a frame appended and trimmed."""
        probe = Event(seq=1, run_id=PROBE_CONTEXT, data="{}", time=time.time())
        await self.append_events(PROBE_CONTEXT, [probe])
        await self.trim_events(PROBE_CONTEXT, probe.seq + 1)

    async def close(self) -> None:  # noqa: B027 - optional for stores with no resources
        """Release connections and files."""


def log_lost(context_id: str, positions: Sequence[Position]) -> None:
    """Exchanges of a branch the store does not have: the conversation stays readable
    (each shows as an empty exchange), and the loss is logged."""
    logger.error("%s: exchanges missing from the store: %s", context_id, list(positions))
