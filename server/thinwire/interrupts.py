"""Human-in-the-loop: what an agent asks a person, and the journal that makes a suspended
run resumable after any restart.

A run that asks (`run.interrupt`, or a tool declared with an `Approval`) is suspended:
its public request goes to the client, everything else — the journal of what the run
did, its history, its arguments — is saved as a checkpoint. The decision resumes it by
durable replay: the agent's code runs again from the top, but every tool call and
decision recorded in the journal returns its recorded result instead of running, and the
frames it already sent are not sent again. So the agent must be deterministic apart from
what goes through `run.tool`: a side effect done before the question is not done twice.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from thinwire import wire
from thinwire.records import without_controls

__all__ = [
    "Approval",
    "Journal",
    "Rejected",
    "ReplayMismatch",
    "Suspend",
    "SuspendCaught",
    "ToolFailed",
    "new_interrupt_id",
]

APPROVAL_OPTIONS = ["approve", "reject"]


def new_interrupt_id() -> str:
    return "int-" + secrets.token_hex(12)


@dataclass(frozen=True)
class Approval:
    """Declares that a tool call needs a person's approval before it runs.

    `prompt` and `payload` are public: they are shown to the user — the prompt without
    control and bidi characters (`Run.interrupt`), the payload as it is.
    """

    prompt: str
    payload: Any = None


class Rejected(Exception):
    """The person rejected a tool call that needed approval; the tool did not run."""

    def __init__(self, tool: str) -> None:
        super().__init__(f"the call to {tool!r} was rejected")
        self.tool = tool


class ToolFailed(Exception):
    """A tool raised. Live, `__cause__` is the original exception; on replay only its
    recorded message is left."""

    def __init__(self, tool: str, message: str) -> None:
        super().__init__(f"tool {tool!r} failed: {message}")
        self.tool = tool


class ReplayMismatch(RuntimeError):
    """On resume the agent did something other than what its journal recorded: its code
    is not deterministic, or it changed while the run was suspended."""


class Suspend(BaseException):
    """Unwinds the agent's code when it asks a person. A BaseException, so the agent's
    `except Exception` cannot swallow the suspension; a bare `except:` or an `except
    BaseException:` that does not re-raise it fails the run (`SuspendCaught`)."""

    def __init__(self, request: wire.InterruptRequest) -> None:
        super().__init__(request.interrupt_id)
        self.request = request


class SuspendCaught(RuntimeError):
    """The agent asked a person, then went on instead of stopping for the answer: its
    code caught the `Suspend` meant to stop the run. The question was sent, but nobody
    could answer it: the run fails (`agent_error`) rather than end as if it had not asked."""

    def __init__(self, request: wire.InterruptRequest) -> None:
        super().__init__(
            f"the agent asked a person ({request.prompt!r}) and then went on: its code "
            "caught thinwire's Suspend (a bare `except:`, or an `except BaseException:` "
            "that did not re-raise it). Let Suspend through, so the run waits for the answer"
        )
        self.request = request


class Journal:
    """The steps of a run that a resume must not do again, and how far a resume got."""

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self.entries: list[dict[str, Any]] = entries if entries is not None else []
        self.position = 0

    @property
    def replaying(self) -> bool:
        return self.position < len(self.entries)

    def replay(self, kind: str, name: str) -> dict[str, Any] | None:
        """The next recorded step, when replaying; it must be this kind of step."""
        if not self.replaying:
            return None
        entry = self.entries[self.position]
        recorded = entry["name"]
        if kind == "interrupt":  # a prompt kept before prompts lost their controls: as now
            recorded = without_controls(recorded)
        if entry["kind"] != kind or recorded != name:
            raise ReplayMismatch(
                f"resumed run did {kind} {name!r} where its journal recorded "
                f"{entry['kind']} {entry['name']!r}"
            )
        self.position += 1
        return entry

    def record(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        self.position = len(self.entries)
