"""Per-principal rate limits: a token bucket each, so one client's flood of sends is
refused (429 `rate_limited`) before it reaches a store, while everyone else goes on."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from thinwire.errors import TooManyRequests

__all__ = ["RateLimiter"]


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
            wait = (1 - tokens) / self.per_second
            raise TooManyRequests("rate_limited", f"too many runs; try again in {wait:.1f}s")
        self._buckets[principal] = (tokens - 1, now)
        while len(self._buckets) > self._max:  # forget the principals idle the longest
            self._buckets.popitem(last=False)
