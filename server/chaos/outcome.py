"""What one drill found: how many tries, how many survived, what was lost, and why.

A drill is strict: `lost` counts acknowledged work the server did not keep, and
`failures` every other broken promise (a 500, a hang, an untyped error, a duplicate). A
drill passes only with neither. `Skip` says why a drill could not run here at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DrillError", "Outcome", "Skip"]


class Skip(Exception):
    """A prerequisite is missing here (no redis-server, no permission to mount)."""


class DrillError(Exception):
    """The drill could not go on: a server that does not come back, a read that fails."""


@dataclass
class Outcome:
    drill: str
    #: Attempts: sends, runs cut, follows, as the drill defines them.
    tries: int = 0
    #: Acknowledged attempts whose result the server kept, or that got what was due.
    survived: int = 0
    #: Acknowledged attempts the server did not keep, or that did not get what was due.
    lost: int = 0
    #: Other figures worth a column, in order: name -> value as printed.
    figures: dict[str, str] = field(default_factory=dict)
    #: Every broken promise, the first one first.
    failures: list[str] = field(default_factory=list)
    skipped: str | None = None
    seconds: float = 0.0
    #: Where its logs were kept (a drill that did not pass keeps its directory).
    directory: str | None = None

    def fail(self, message: str) -> None:
        self.failures.append(message)

    def figure(self, name: str, value: object) -> None:
        self.figures[name] = value if isinstance(value, str) else format_value(value)

    @property
    def passed(self) -> bool:
        return self.skipped is not None or (self.lost == 0 and not self.failures)

    @property
    def verdict(self) -> str:
        if self.skipped is not None:
            return "SKIP"
        return "PASS" if self.passed else "FAIL"


def format_value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)
