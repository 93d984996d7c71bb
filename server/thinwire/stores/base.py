"""The store interface: where every conversation's memory lives between runs.

A store keeps one `ContextRecord` per context and an append-only audit trail of
AgentState writes. The contract every implementation must meet (and the shared
conformance suite in `server/tests/test_stores.py` checks):

- `save` is compare-and-set on `version`: it lands whole, with its audit entries, or
  not at all, and a stale `expected_version` raises `VersionConflict` — never a silent
  overwrite.
- A crash at any point leaves the old version or the new one, nothing in between.
- Records and audit entries are plain JSON on the way in and out: what is loaded is
  equal to what was saved, never aliased to it.
- `delete` removes every trace of a context: its record, its audit trail, its events.
- Events (the frames of a context's recent runs) are kept by seq, once each: appending
  an event again is a no-op, so a retried flush never duplicates a frame.
- Leases: at most one owner holds a context's lease at a time, until it releases it or
  its time runs out. Each grant comes with a fencing token, greater than every token
  before it; a save given `fence` lands only while that token still holds the lease, so
  a replica that lost its lease (paused, partitioned) cannot overwrite the next one.

A `shared` store (Redis) is used by several server processes at once; the others are
owned by one process, which may cache what it loaded.

These map onto SQLite transactions and onto Redis (WATCH/MULTI or a script), so the
same interface serves one process or several replicas.
"""

from __future__ import annotations

import abc
import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AlreadyExists",
    "AuditEntry",
    "ContextRecord",
    "Event",
    "LeaseLost",
    "Store",
    "StoreError",
    "TranscriptView",
    "VersionConflict",
]


class StoreError(Exception):
    """Base of the errors a store raises on purpose."""


class VersionConflict(StoreError):
    def __init__(self, context_id: str, expected: int, actual: int | None) -> None:
        super().__init__(f"{context_id}: expected version {expected}, found {actual}")
        self.context_id = context_id
        self.expected = expected
        self.actual = actual


class AlreadyExists(StoreError):
    pass


class LeaseLost(StoreError):
    """A fenced save whose lease has expired or passed to another owner."""


@dataclass
class ContextRecord:
    """Everything the server remembers about one conversation."""

    id: str
    agent: str
    owner: str
    #: Bumped by every successful save; the compare-and-set token.
    version: int = 0
    #: The agent's internal messages (system prompt, user, tool, assistant).
    history: list[dict[str, Any]] = field(default_factory=list)
    #: AgentState: key -> JSON value.
    state: dict[str, Any] = field(default_factory=dict)
    #: The public projection of the history: {role, text, toolCalls, stopReason}.
    transcript: list[dict[str, Any]] = field(default_factory=list)
    #: Highest frame seq that may have been sent for this context.
    last_seq: int = 0
    #: Set while a run is in progress: {"runId", "seqLease"}. Found set on a context no
    #: process is running, it marks a run that was killed.
    active_run: dict[str, Any] | None = None
    #: The latest run: {"runId", "firstSeq"}; its events are what a reattach replays.
    last_run: dict[str, Any] | None = None
    #: The checkpoint of a run waiting for a person: {"runId", "text", "journal",
    #: "interrupt"}. Only "interrupt" (the public request) is ever shown to a client.
    suspended: dict[str, Any] | None = None
    #: Ids of interrupts already answered (the latest ones), to tell "answered" from
    #: "unknown".
    answered: list[str] = field(default_factory=list)
    created_at: float = 0.0
    updated_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "history": self.history,
            "state": self.state,
            "transcript": self.transcript,
            "lastSeq": self.last_seq,
            "activeRun": self.active_run,
            "lastRun": self.last_run,
            "suspended": self.suspended,
            "answered": self.answered,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }

    @classmethod
    def from_json(
        cls, *, id: str, agent: str, owner: str, version: int, data: dict[str, Any]
    ) -> ContextRecord:
        return cls(
            id=id,
            agent=agent,
            owner=owner,
            version=version,
            history=data["history"],
            state=data["state"],
            transcript=data["transcript"],
            last_seq=data["lastSeq"],
            active_run=data["activeRun"],
            last_run=data.get("lastRun"),
            suspended=data.get("suspended"),
            answered=data.get("answered", []),
            created_at=data["createdAt"],
            updated_at=data["updatedAt"],
        )


@dataclass(frozen=True)
class TranscriptView:
    """What reading a conversation back needs, and no more: a store can load it without
    the history, which is most of a long conversation's record."""

    agent: str
    owner: str
    #: The transcript as a JSON array, ready to be sent.
    turns_json: str
    active_run: dict[str, Any] | None
    #: The public request of the interrupt the conversation waits for, if any.
    pending_interrupt: dict[str, Any] | None

    @classmethod
    def of(cls, record: ContextRecord) -> TranscriptView:
        suspended = record.suspended
        return cls(
            agent=record.agent,
            owner=record.owner,
            turns_json=json.dumps(record.transcript, ensure_ascii=False, separators=(",", ":")),
            active_run=record.active_run,
            pending_interrupt=suspended["interrupt"] if suspended else None,
        )


@dataclass(frozen=True)
class AuditEntry:
    """One AgentState write: which key, the value written, when, and by whom."""

    key: str
    value: Any
    time: float
    source: str
    #: The context version the write landed in.
    version: int = 0


@dataclass(frozen=True)
class Event:
    """One frame as it went on the wire: its seq, its run and its JSON."""

    seq: int
    run_id: str
    data: str
    time: float


class Store(abc.ABC):
    #: True when several server processes use this store at once.
    shared: bool = False

    @abc.abstractmethod
    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        """Store a new context at version 1; `AlreadyExists` if the id is taken."""

    @abc.abstractmethod
    async def load(self, context_id: str) -> ContextRecord | None:
        """The stored record, or None."""

    async def load_transcript(self, context_id: str) -> TranscriptView | None:
        """The stored transcript and what goes with it, or None. A store may read less
        than `load` does for it."""
        record = await self.load(context_id)
        return None if record is None else TranscriptView.of(record)

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
        `fence`, if that token still holds the context's lease); return the new version.
        The audit entries and events are appended, and the events before `trim_before`
        dropped, in the same atomic step."""

    @abc.abstractmethod
    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        """Keep these frames; a seq already kept is left as it is."""

    @abc.abstractmethod
    async def read_events(self, context_id: str, after: int = 0) -> list[Event]:
        """The kept frames with seq > `after`, in seq order."""

    @abc.abstractmethod
    async def trim_events(self, context_id: str, before_seq: int) -> None:
        """Drop the frames with seq < `before_seq`."""

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
    async def acquire_lease(self, context_id: str, owner: str, ttl: float) -> int | None:
        """A fencing token if `owner` now holds the lease for `ttl` seconds; None if
        another owner holds it."""

    @abc.abstractmethod
    async def renew_lease(self, context_id: str, owner: str, token: int, ttl: float) -> bool:
        """Extend a lease still held with `token`; False if it was lost."""

    @abc.abstractmethod
    async def release_lease(self, context_id: str, owner: str, token: int) -> None:
        """Give the lease up, if `token` still holds it."""

    @abc.abstractmethod
    async def lease_owner(self, context_id: str) -> str | None:
        """Who holds the lease now, if anyone."""

    @abc.abstractmethod
    async def request_stop(self, run_id: str) -> None:
        """Ask whichever process runs `run_id` to stop it."""

    @abc.abstractmethod
    async def stop_requested(self, run_id: str) -> bool:
        """Whether a stop of `run_id` was asked for."""

    @abc.abstractmethod
    async def delete(self, context_id: str) -> bool:
        """Remove the context, its audit trail and its events; False if there was none."""

    @abc.abstractmethod
    async def audit(self, context_id: str, key: str | None = None) -> list[AuditEntry]:
        """The audit trail of a context (of one key), oldest first."""

    async def close(self) -> None:  # noqa: B027 - optional for stores with no resources
        """Release connections and files."""
