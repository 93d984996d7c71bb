"""The conversation record: everything the server remembers about one context, and the
verbs that change its run state, each transition written once.

    start_run ──▶ end_turn(stop_reason, text)            a run ends (end, stopped, error)
        │    └──▶ suspend(checkpoint, …)                 it waits for a person
        │              └──▶ resume(interrupt_id)         a decision, then start_run again
        │              └──▶ end_waiting_run()            a stop while it waits
        └──▶ end_killed_run()                            its process died mid-run

Stored as JSON with camelCase keys (`rest_json`); the history and the transcript, nearly
all of a long conversation, are `JsonList`s held as text while the context is at rest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinwire import wire
from thinwire.errors import Conflict, NotFound
from thinwire.jsontext import JsonList, dumps

__all__ = [
    "ANSWERED_KEPT",
    "SENDS_KEPT",
    "SEQ_LEASE",
    "ActiveRun",
    "Checkpoint",
    "ContextRecord",
    "LastRun",
    "TranscriptView",
    "public_turn",
]

#: Frame seqs a run may use before its start is saved again. A killed run's context
#: resumes numbering past the lease, so no seq a client may have seen is ever reused.
SEQ_LEASE = 1_000_000
#: How many answered interrupt ids a context remembers.
ANSWERED_KEPT = 100
#: How many message ids (of the latest sends) a context remembers, to tell a retry.
SENDS_KEPT = 100
#: How many runs' token usage a context keeps (the totals count every run).
USAGE_KEPT = 200


@dataclass(frozen=True)
class ActiveRun:
    """A run in progress. Found on a context no process runs, it marks a killed run."""

    run_id: str
    #: The highest seq the run may use.
    seq_lease: int

    def to_json(self) -> dict[str, Any]:
        return {"runId": self.run_id, "seqLease": self.seq_lease}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ActiveRun:
        return cls(run_id=data["runId"], seq_lease=data["seqLease"])


@dataclass(frozen=True)
class LastRun:
    """The latest run; its frames are what a reattach replays."""

    run_id: str
    first_seq: int

    def to_json(self) -> dict[str, Any]:
        return {"runId": self.run_id, "firstSeq": self.first_seq}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LastRun:
        return cls(run_id=data["runId"], first_seq=data["firstSeq"])


@dataclass(frozen=True)
class Checkpoint:
    """A run waiting for a person: what its resume replays. Only `interrupt`, the public
    request, is ever shown to a client."""

    run_id: str
    #: The user message the run answers; the resume runs the agent on it again.
    text: str
    #: The steps the run did before it asked (see `thinwire.interrupts`).
    journal: list[dict[str, Any]]
    #: The public request, as `wire.InterruptRequest` JSON.
    interrupt: dict[str, Any]
    #: The page's extra input that came with `text`, if any.
    data: dict[str, Any] | None = None

    @property
    def interrupt_id(self) -> str:
        return str(self.interrupt["interruptId"])

    def journal_with(self, decision: Any) -> list[dict[str, Any]]:
        """The journal a resume replays: the steps so far, then the person's answer."""
        answer = {"kind": "interrupt", "name": self.interrupt["prompt"], "decision": decision}
        return [*self.journal, answer]

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "text": self.text,
            "journal": self.journal,
            "interrupt": self.interrupt,
            "data": self.data,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            run_id=data["runId"],
            text=data["text"],
            journal=data["journal"],
            interrupt=data["interrupt"],
            data=data.get("data"),
        )


def public_turn(
    role: str, text: str, tool_calls: Sequence[str] = (), stop_reason: str | None = None
) -> dict[str, Any]:
    """A transcript turn, built through its wire model: the transcript holds nothing a
    client may not see, so it can be sent as it is stored."""
    turn = wire.TranscriptTurn.model_validate(
        {"role": role, "text": text, "toolCalls": list(tool_calls), "stopReason": stop_reason}
    )
    return turn.model_dump(by_alias=True)


class ContextRecord:
    """Everything the server remembers about one conversation."""

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
        active_run: ActiveRun | None = None,
        last_run: LastRun | None = None,
        checkpoint: Checkpoint | None = None,
        answered: list[str] | None = None,
        sends: dict[str, str] | None = None,
        usage: dict[str, Any] | None = None,
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
        self.active_run = active_run
        self.last_run = last_run
        #: The run waiting for a person, if any.
        self.checkpoint = checkpoint
        #: Ids of interrupts already answered (the latest ones), to tell "answered" from
        #: "unknown".
        self.answered: list[str] = [] if answered is None else answered
        #: The client's message id of each of the latest sends -> the run it started.
        self.sends: dict[str, str] = {} if sends is None else sends
        #: Model tokens, server-only: {"total": {model: counts}, "runs": [latest runs]}.
        self.usage: dict[str, Any] = {"total": {}, "runs": []} if usage is None else usage
        self.created_at = created_at
        self.updated_at = updated_at
        #: The history's and the transcript's text as the store holds them, by name, for
        #: a store that can append to what it holds (SQLite): set by its loads and saves.
        self.stored: dict[str, str] = {}

    # --- the conversation -------------------------------------------------------------

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

    def clear(self) -> None:
        """Forget the conversation but its system prompt; state and id stay."""
        self.history = [m for m in self.history if m["role"] == "system"]
        self.transcript = []

    # --- run state --------------------------------------------------------------------

    @property
    def pending_interrupt(self) -> dict[str, Any] | None:
        """The public request of the decision the conversation waits for, if any."""
        return self.checkpoint.interrupt if self.checkpoint else None

    def start_run(
        self,
        run_id: str,
        text: str | None,
        *,
        data: dict[str, Any] | None = None,
        message_id: str | None = None,
    ) -> int | None:
        """A run starts, on the user's `text` (None: it resumes a checkpoint) with the
        page's `data`, sent as `message_id`. Returns the first seq of the run before, whose
        frames the store may now drop."""
        previous = self.last_run
        if text is not None:
            message: dict[str, Any] = {"role": "user", "content": text}
            if data:
                message["data"] = data
            self.add_message(message)
            self.add_turn(public_turn("user", text))
        if message_id is not None:
            self.sends[message_id] = run_id
            for oldest in list(self.sends)[: max(0, len(self.sends) - SENDS_KEPT)]:
                del self.sends[oldest]
        self.active_run = ActiveRun(run_id, self.last_seq + SEQ_LEASE)
        self.last_run = LastRun(run_id, self.last_seq + 1)
        return previous.first_seq if previous else None

    def end_turn(
        self,
        stop_reason: wire.StopReason,
        text: str,
        tool_calls: Sequence[str] = (),
        *,
        said_before: str = "",
    ) -> None:
        """The run ends: its reply joins the history (with what it said before a
        suspension, `said_before`) and, unless it showed nothing, the transcript."""
        self.add_message(
            {"role": "assistant", "content": said_before + text, "stopReason": stop_reason}
        )
        if text or tool_calls or stop_reason != "end":
            self.add_turn(public_turn("assistant", text, tool_calls, stop_reason))
        self.active_run = None

    def add_usage(self, run_id: str, usage: Mapping[str, Mapping[str, int]], at: float) -> None:
        """Count a run's model tokens (per model: calls, inputTokens, outputTokens)."""
        total = self.usage["total"]
        for model, counts in usage.items():
            kept = total.setdefault(model, {"calls": 0, "inputTokens": 0, "outputTokens": 0})
            for name, count in counts.items():
                kept[name] = kept.get(name, 0) + count
        runs = [*self.usage["runs"], {"runId": run_id, "at": at, "models": dict(usage)}]
        self.usage["runs"] = runs[-USAGE_KEPT:]

    def suspend(
        self, checkpoint: Checkpoint, text: str, tool_calls: Sequence[str], *, rollback_to: int
    ) -> None:
        """The run asks a person. Its resume replays it from its start, so the history
        goes back to `rollback_to` messages (the steps are in the checkpoint's journal)."""
        del self.history[rollback_to:]
        self.checkpoint = checkpoint
        self.add_turn(public_turn("assistant", text, tool_calls, "interrupted"))
        self.active_run = None

    def waiting_for(self, interrupt_id: str) -> Checkpoint:
        """The checkpoint waiting for `interrupt_id`, or `interrupt_answered` /
        `interrupt_not_found`."""
        checkpoint = self.checkpoint
        if checkpoint is None or checkpoint.interrupt_id != interrupt_id:
            if interrupt_id in self.answered:
                raise Conflict("interrupt_answered", f"{interrupt_id} was answered already")
            raise NotFound("interrupt_not_found", f"no pending interrupt {interrupt_id[:64]}")
        return checkpoint

    def resume(self, interrupt_id: str) -> Checkpoint:
        """The pending interrupt `interrupt_id` is answered: the checkpoint, to replay."""
        checkpoint = self.waiting_for(interrupt_id)
        self.checkpoint = None
        self.answered = [*self.answered, interrupt_id][-ANSWERED_KEPT:]
        return checkpoint

    def end_waiting_run(self) -> Checkpoint:
        """A stop while the run waits for a person: it ends as stopped, unanswered."""
        checkpoint = self.checkpoint
        assert checkpoint is not None
        self.checkpoint = None
        self.end_turn("stopped", "")
        return checkpoint

    def end_killed_run(self, text: str = "", tool_calls: Sequence[str] = ()) -> ActiveRun:
        """The process running the active run died: its turn ends as interrupted, with
        what it had shown (`text`, `tool_calls`), and frame numbering resumes past
        anything it could have sent."""
        active = self.active_run
        assert active is not None
        self.end_turn("interrupted", text, tool_calls)
        self.last_seq = max(self.last_seq, active.seq_lease)
        return active

    # --- storage ----------------------------------------------------------------------

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
            "activeRun": self.active_run.to_json() if self.active_run else None,
            "lastRun": self.last_run.to_json() if self.last_run else None,
            "suspended": self.checkpoint.to_json() if self.checkpoint else None,
            "answered": self.answered,
            "sends": self.sends,
            "usage": self.usage,
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
        active, last, checkpoint = data["activeRun"], data.get("lastRun"), data.get("suspended")
        return cls(
            id=id,
            agent=agent,
            owner=owner,
            version=version,
            history=data["history"] if history_json is None else None,
            state=data["state"],
            transcript=data["transcript"] if transcript_json is None else None,
            last_seq=data["lastSeq"],
            active_run=ActiveRun.from_json(active) if active else None,
            last_run=LastRun.from_json(last) if last else None,
            checkpoint=Checkpoint.from_json(checkpoint) if checkpoint else None,
            answered=data.get("answered", []),
            sends=data.get("sends", {}),
            usage=data.get("usage"),
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
    active_run: ActiveRun | None
    #: The public request of the interrupt the conversation waits for, if any.
    pending_interrupt: dict[str, Any] | None

    @classmethod
    def of(cls, record: ContextRecord) -> TranscriptView:
        return cls(
            agent=record.agent,
            owner=record.owner,
            turns_json=record.transcript_json(),
            active_run=record.active_run,
            pending_interrupt=record.pending_interrupt,
        )

    @classmethod
    def stored(
        cls, agent: str, owner: str, data: str, transcript_json: str | None
    ) -> TranscriptView:
        """From a store that keeps the transcript's text apart from the rest of the record
        (`data`, the JSON of `rest_json`); without the text, from `data` as written whole
        by an earlier version."""
        fields = json.loads(data)
        active, checkpoint = fields["activeRun"], fields.get("suspended")
        return cls(
            agent=agent,
            owner=owner,
            turns_json=transcript_json
            if transcript_json is not None
            else dumps(fields["transcript"]),
            active_run=ActiveRun.from_json(active) if active else None,
            pending_interrupt=checkpoint["interrupt"] if checkpoint else None,
        )
