"""Leases and stop requests held in this process: enough for the stores one process owns."""

from __future__ import annotations

import time
from collections.abc import Callable

from thinwire.stores.base import LeaseLost

__all__ = ["LocalLeases"]


class LocalLeases:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._leases: dict[str, tuple[str, int, float]] = {}  # id -> owner, token, expiry
        self._tokens = 0
        self._stops: set[str] = set()

    def _current(self, context_id: str) -> tuple[str, int, float] | None:
        lease = self._leases.get(context_id)
        if lease is not None and lease[2] <= self._clock():
            del self._leases[context_id]
            return None
        return lease

    async def acquire_lease(self, context_id: str, owner: str, ttl: float) -> int | None:
        lease = self._current(context_id)
        if lease is not None and lease[0] != owner:
            return None
        self._tokens += 1
        self._leases[context_id] = (owner, self._tokens, self._clock() + ttl)
        return self._tokens

    async def renew_lease(self, context_id: str, owner: str, token: int, ttl: float) -> bool:
        lease = self._current(context_id)
        if lease is None or lease[:2] != (owner, token):
            return False
        self._leases[context_id] = (owner, token, self._clock() + ttl)
        return True

    async def release_lease(self, context_id: str, owner: str, token: int) -> None:
        lease = self._current(context_id)
        if lease is not None and lease[:2] == (owner, token):
            del self._leases[context_id]

    async def lease_owner(self, context_id: str) -> str | None:
        lease = self._current(context_id)
        return lease[0] if lease else None

    def check_fence(self, context_id: str, fence: int | None) -> None:
        if fence is None:
            return
        lease = self._current(context_id)
        if lease is None or lease[1] != fence:
            raise LeaseLost(f"{context_id}: the lease of token {fence} is gone")

    async def request_stop(self, run_id: str) -> None:
        self._stops.add(run_id)

    async def stop_requested(self, run_id: str) -> bool:
        return run_id in self._stops

    def forget_leases(self, context_id: str) -> None:
        self._leases.pop(context_id, None)
