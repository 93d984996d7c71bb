"""Per-principal limits: a token bucket of runs each, so one client's flood of sends is
refused (429 `rate_limited`) before it reaches a store; a cap on runs in progress (429
`too_many_runs`), so one client cannot keep the agents, and the models they pay for,
busy for everyone; and a cap on open streams (429 `too_many_streams`), so one client's
idle followers cannot starve everyone else."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from thinwire.codes import ErrorCode
from thinwire.errors import TooManyRequests, whole_seconds
from thinwire.metrics import METRICS

__all__ = ["Cap", "RateLimiter"]


class RateLimiter:
    """`burst` runs at once, then `per_second` more each second, per principal."""

    def __init__(
        self,
        per_second: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_principals: int = 100_000,
    ) -> None:
        self.per_second = per_second
        self.burst = burst
        self._clock = clock
        self._max = max_principals
        # principal -> (tokens, when they were counted); least recently seen first
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, principal: str) -> None:
        """Spend one token of `principal`'s bucket, or raise `rate_limited`."""
        now = self._clock()
        tokens, then = self._buckets.pop(principal, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.per_second)
        if tokens < 1:
            self._buckets[principal] = (tokens, now)
            wait = whole_seconds((1 - tokens) / self.per_second)  # as Retry-After says it
            METRICS.refused("rate_limited")
            raise TooManyRequests(
                "rate_limited", f"too many runs; try again in {wait} s", retry_after=float(wait)
            )
        self._buckets[principal] = (tokens - 1, now)
        while len(self._buckets) > self._max:  # forget the principals idle the longest
            self._buckets.popitem(last=False)


class Cap:
    """At most `per_principal` of something open at once per principal (0: no cap);
    beyond it, 429 `code`, whose message reads "at most N `refusal`"."""

    def __init__(self, per_principal: int, code: ErrorCode, refusal: str) -> None:
        self.per_principal = per_principal
        self.code = code
        self.refusal = refusal
        self._open: dict[str, int] = {}

    def open(self, principal: str) -> Callable[[], None]:
        """Count one more for `principal`, or raise; returns the function that closes it
        (calling it again does nothing)."""
        count = self._open.get(principal, 0)
        if self.per_principal and count >= self.per_principal:
            METRICS.refused(self.code)
            raise TooManyRequests(self.code, f"at most {self.per_principal} {self.refusal}")
        self._open[principal] = count + 1
        closed = False

        def close() -> None:
            nonlocal closed
            if closed:
                return
            closed = True
            left = self._open[principal] - 1
            if left:
                self._open[principal] = left
            else:
                del self._open[principal]

        return close

    def count(self, principal: str) -> int:
        return self._open.get(principal, 0)
