"""Deadlines instead of sleeps: wait for a condition, and give up loudly when it does
not come. And the one statistic the drills print."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from chaos.outcome import DrillError

__all__ = ["Deadline", "percentile", "wait_until"]

#: How often a condition is looked at again.
POLL = 0.02


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def passed(self) -> bool:
        return time.monotonic() >= self.end


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until `predicate()` held; DrillError naming `what` after `timeout`."""
    began = time.monotonic()
    deadline = Deadline(timeout)
    while not predicate():
        if deadline.passed():
            raise DrillError(f"{what}: not within {timeout:.0f} s")
        time.sleep(POLL)
    return time.monotonic() - began


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]
