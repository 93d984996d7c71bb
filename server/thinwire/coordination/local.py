"""The coordinator of one process: leases in memory, and no one elsewhere to reach."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from thinwire.coordination.base import Coordinator, Lease

__all__ = ["LocalCoordinator"]

#: How many stop requests are remembered.
STOPS_KEPT = 1000
#: How many used tickets are remembered (each only while it could still be used).
USED_KEPT = 10_000


@dataclass
class Table:
    """The leases, stop requests and used tickets of the coordinators of one process."""

    clock: Callable[[], float]
    leases: dict[str, tuple[str, int, float]] = field(default_factory=dict)  # owner, token, end
    tokens: int = 0
    #: Runs asked to stop, the latest `STOPS_KEPT`, oldest first.
    stops: dict[str, None] = field(default_factory=dict)
    #: Used tickets and when each may be forgotten, about oldest first.
    used: dict[str, float] = field(default_factory=dict)
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))


class LocalCoordinator(Coordinator):
    """Enough for a store one process owns (memory, SQLite). Its leases are real, so a
    restarted process, which holds none, tells a run killed with its predecessor from
    one it is running."""

    def __init__(
        self, *, lease_ttl: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(lease_ttl=lease_ttl)
        self._table = Table(clock)

    def replica(self) -> LocalCoordinator:
        """A coordinator of another owner over the same leases: two replicas in one
        process, as tests want them."""
        other = LocalCoordinator(lease_ttl=self.lease_ttl)
        other._table = self._table
        return other

    def _current(self, context_id: str) -> tuple[str, int, float] | None:
        table = self._table
        lease = table.leases.get(context_id)
        if lease is not None and lease[2] <= table.clock():
            del table.leases[context_id]
            return None
        return lease

    def _grant(self, context_id: str, token: int) -> None:
        self._table.leases[context_id] = (
            self.replica_id,
            token,
            self._table.clock() + self.lease_ttl,
        )

    async def acquire(self, context_id: str) -> Lease | None:
        lease = self._current(context_id)
        if lease is not None and lease[0] != self.replica_id:
            return None
        self._table.tokens += 1
        self._grant(context_id, self._table.tokens)
        return Lease(context_id, self._table.tokens)

    async def renew(self, lease: Lease) -> bool:
        current = self._current(lease.context_id)
        if current is None or current[:2] != (self.replica_id, lease.token):
            return False
        self._grant(lease.context_id, lease.token)
        return True

    async def release(self, lease: Lease) -> None:
        current = self._current(lease.context_id)
        if current is not None and current[:2] == (self.replica_id, lease.token):
            del self._table.leases[lease.context_id]

    async def holder(self, context_id: str) -> str | None:
        lease = self._current(context_id)
        return lease[0] if lease else None

    async def request_stop(self, run_id: str) -> None:
        stops = self._table.stops
        stops[run_id] = None
        while len(stops) > STOPS_KEPT:
            del stops[next(iter(stops))]

    async def stop_requested(self, run_id: str) -> bool:
        return run_id in self._table.stops

    async def secret(self) -> bytes:
        return self._table.secret

    async def use_once(self, key: str, ttl: float, secret: bytes) -> bool:
        if secret != self._table.secret:
            return False
        used, now = self._table.used, self._table.clock()
        while used and (len(used) >= USED_KEPT or next(iter(used.values())) <= now):
            del used[next(iter(used))]
        if used.get(key, now) > now:
            return False
        used.pop(key, None)
        used[key] = now + ttl
        return True
