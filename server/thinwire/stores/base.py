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
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
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


EMPTY_ARRAY = re.compile(r"\[\s*\]")


def dumps(value: Any) -> str:
    """Compact JSON; NaN and infinities are refused, as JSON has no place for them."""
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


class JsonList:
    """A list of JSON values, held as the list or as its JSON text.

    Text is one object where the list is thousands (a dict per message), which is what
    matters between runs: the garbage collector visits every element of every live list
    on each full collection, and a store writes text anyway. The list is decoded the
    first time it is asked for, and is from then on the truth (the text is dropped, as
    the list may change)."""

    __slots__ = ("_items", "_text")

    def __init__(self, items: list[Any] | None = None, text: str | None = None) -> None:
        if items is None and text is None:
            items = []
        self._items = items
        self._text = None if items is not None else text

    @property
    def items(self) -> list[Any]:
        if self._items is None:
            assert self._text is not None
            self._items, self._text = json.loads(self._text), None
        return self._items

    def json(self) -> str:
        return dumps(self._items) if self._items is not None else str(self._text)

    def append(self, item: Any) -> None:
        """Add an item at the end; held as text, the text grows and stays undecoded."""
        if self._items is not None:
            self._items.append(item)
            return
        text = str(self._text).rstrip()
        if not text.endswith("]"):
            raise ValueError("a JsonList's text must be a JSON array")
        empty = EMPTY_ARRAY.fullmatch(text) is not None
        self._text = f"{text[:-1]}{'' if empty else ','}{dumps(item)}]"

    def compact(self) -> None:
        """Hold the text instead of the list (ValueError if it is not JSON)."""
        if self._items is not None:
            self._text, self._items = dumps(self._items), None

    @property
    def compacted(self) -> bool:
        return self._items is None


class ContextRecord:
    """Everything the server remembers about one conversation.

    The history and the transcript, nearly all of a long conversation, are `JsonList`s:
    a context at rest holds them as text (`compact`), a run decodes what it uses.
    """

    def __init__(
        self,
        id: str,
        agent: str,
        owner: str,
        version: int = 0,
        history: list[dict[str, Any]] | None = None,
        state: dict[str, Any] | None = None,
        transcript: list[dict[str, Any]] | None = None,
        last_seq: int = 0,
        active_run: dict[str, Any] | None = None,
        last_run: dict[str, Any] | None = None,
        suspended: dict[str, Any] | None = None,
        answered: list[str] | None = None,
        created_at: float = 0.0,
        updated_at: float = 0.0,
        *,
        history_json: str | None = None,
        transcript_json: str | None = None,
    ) -> None:
        self.id = id
        self.agent = agent
        self.owner = owner
        #: Bumped by every successful save; the compare-and-set token.
        self.version = version
        self._history = JsonList(history, history_json)
        #: AgentState: key -> JSON value.
        self.state: dict[str, Any] = {} if state is None else state
        self._transcript = JsonList(transcript, transcript_json)
        #: Highest frame seq that may have been sent for this context.
        self.last_seq = last_seq
        #: Set while a run is in progress: {"runId", "seqLease"}. Found set on a context no
        #: process is running, it marks a run that was killed.
        self.active_run = active_run
        #: The latest run: {"runId", "firstSeq"}; its events are what a reattach replays.
        self.last_run = last_run
        #: The checkpoint of a run waiting for a person: {"runId", "text", "journal",
        #: "interrupt"}. Only "interrupt" (the public request) is ever shown to a client.
        self.suspended = suspended
        #: Ids of interrupts already answered (the latest ones), to tell "answered" from
        #: "unknown".
        self.answered: list[str] = [] if answered is None else answered
        self.created_at = created_at
        self.updated_at = updated_at
        #: The history's and the transcript's text as the store holds them, by name, for
        #: a store that can append to what it holds (SQLite): set by its loads and saves.
        self.stored: dict[str, str] = {}

    @property
    def history(self) -> list[dict[str, Any]]:
        """The agent's internal messages (system prompt, user, tool, assistant)."""
        return self._history.items

    @history.setter
    def history(self, messages: list[dict[str, Any]]) -> None:
        self._history = JsonList(messages)

    @property
    def transcript(self) -> list[dict[str, Any]]:
        """The public projection of the history: {role, text, toolCalls, stopReason}."""
        return self._transcript.items

    @transcript.setter
    def transcript(self, turns: list[dict[str, Any]]) -> None:
        self._transcript = JsonList(turns)

    def add_message(self, message: dict[str, Any]) -> None:
        """Append to the history without decoding it."""
        self._history.append(message)

    def add_turn(self, turn: dict[str, Any]) -> None:
        """Append to the transcript without decoding it."""
        self._transcript.append(turn)

    def history_json(self) -> str:
        return self._history.json()

    def transcript_json(self) -> str:
        return self._transcript.json()

    def compact(self) -> None:
        """Hold the history and the transcript as text until they are next used."""
        self._history.compact()
        self._transcript.compact()

    @property
    def at_rest(self) -> bool:
        """True while both the history and the transcript are held as text."""
        return self._history.compacted and self._transcript.compacted

    def rest_json(self) -> dict[str, Any]:
        """Everything but the history and the transcript."""
        return {
            "state": self.state,
            "lastSeq": self.last_seq,
            "activeRun": self.active_run,
            "lastRun": self.last_run,
            "suspended": self.suspended,
            "answered": self.answered,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }

    def to_json(self) -> dict[str, Any]:
        return {"history": self.history, "transcript": self.transcript, **self.rest_json()}

    def encode(self) -> str:
        """`to_json` as text, with the history and the transcript spliced in as they
        are held (no decoding of a compacted record)."""
        rest = dumps(self.rest_json())
        return f'{{"history":{self.history_json()},"transcript":{self.transcript_json()},{rest[1:]}'

    @classmethod
    def from_json(
        cls,
        *,
        id: str,
        agent: str,
        owner: str,
        version: int,
        data: dict[str, Any],
        history_json: str | None = None,
        transcript_json: str | None = None,
    ) -> ContextRecord:
        """A record from `to_json`'s fields; the history and the transcript may come as
        text instead (and are then decoded only when used)."""
        return cls(
            id=id,
            agent=agent,
            owner=owner,
            version=version,
            history=data["history"] if history_json is None else None,
            state=data["state"],
            transcript=data["transcript"] if transcript_json is None else None,
            last_seq=data["lastSeq"],
            active_run=data["activeRun"],
            last_run=data.get("lastRun"),
            suspended=data.get("suspended"),
            answered=data.get("answered", []),
            created_at=data["createdAt"],
            updated_at=data["updatedAt"],
            history_json=history_json,
            transcript_json=transcript_json,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContextRecord):
            return NotImplemented
        return (self.id, self.agent, self.owner, self.version, self.to_json()) == (
            other.id,
            other.agent,
            other.owner,
            other.version,
            other.to_json(),
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"ContextRecord(id={self.id!r}, agent={self.agent!r}, version={self.version})"


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
            turns_json=record.transcript_json(),
            active_run=record.active_run,
            pending_interrupt=suspended["interrupt"] if suspended else None,
        )

    @classmethod
    def stored(
        cls, agent: str, owner: str, data: str, transcript_json: str | None
    ) -> TranscriptView:
        """From a store that keeps the transcript's text apart from the rest of the record
        (`data`, the JSON of `rest_json`); without the text, from `data` as written whole
        by an earlier version."""
        fields = json.loads(data)
        suspended = fields.get("suspended")
        return cls(
            agent=agent,
            owner=owner,
            turns_json=transcript_json
            if transcript_json is not None
            else dumps(fields["transcript"]),
            active_run=fields["activeRun"],
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
