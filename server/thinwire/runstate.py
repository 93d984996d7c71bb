"""A conversation's run state: the run in progress, the latest run, the run waiting for a
person. Typed records, stored as JSON with camelCase keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ActiveRun", "Checkpoint", "LastRun"]


@dataclass(frozen=True)
class ActiveRun:
    """A run in progress. Found on a context no process runs, it marks a killed run."""

    run_id: str
    #: The highest seq the run may use.
    seq_lease: int
    #: When its start was recorded (None in a record an older version wrote).
    started_at: float | None = None
    #: Resuming after a decision: what the run that asked had done by then
    #: (`Checkpoint.kept`), which a kill of this one must not take back.
    kept: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "runId": self.run_id,
            "seqLease": self.seq_lease,
            "startedAt": self.started_at,
        }
        if self.kept is not None:
            data["kept"] = self.kept
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ActiveRun:
        return cls(
            run_id=data["runId"],
            seq_lease=data["seqLease"],
            started_at=data.get("startedAt"),
            kept=data.get("kept"),
        )


@dataclass(frozen=True)
class LastRun:
    """The latest run; its frames are what a reattach replays."""

    run_id: str
    first_seq: int
    #: Stopped while it waited for a decision: its frames end with a question that is
    #: gone, so a reattach gets nothing.
    stopped_waiting: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"runId": self.run_id, "firstSeq": self.first_seq}
        if self.stopped_waiting:
            data["stoppedWaiting"] = True
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LastRun:
        return cls(
            run_id=data["runId"],
            first_seq=data["firstSeq"],
            stopped_waiting=data.get("stoppedWaiting", False),
        )


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
    #: What the run had done when it asked — the history it had added, its AgentState
    #: and the writes' audit entries — kept for a stop while it waits (a resume does all
    #: of it again); server-only, like the journal.
    kept: dict[str, Any] | None = None

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
            "kept": self.kept,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Checkpoint:
        return cls(
            run_id=data["runId"],
            text=data["text"],
            journal=data["journal"],
            interrupt=data["interrupt"],
            data=data.get("data"),
            kept=data.get("kept"),
        )
