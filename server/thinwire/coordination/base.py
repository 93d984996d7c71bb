"""The coordinator interface: leases, fencing, stop requests, runs that live elsewhere.

A `Store` keeps what a conversation is; a `Coordinator` keeps who is changing it. One
process needs little of it (`LocalCoordinator`); replicas sharing a Redis store need all
of it (`RedisCoordinator`). The server asks the same questions of either, so nothing
else branches on "is this shared". The contract (checked for both by
`server/tests/test_coordinators.py`):

- Leases: at most one owner holds a context's lease at a time, until it releases it or
  its time (`lease_ttl`) runs out. Each grant comes with a token greater than every
  token before it.
- Fencing: `fence(lease)` is what a save carries so that it lands only while the lease
  holds, for a store other processes write too; None where no other process writes.
- Stop requests reach the process running a run, which checks for them every
  `keepalive` seconds while it runs (None: only this process can ask, and it stops its
  runs directly).
- `stale` tells whether another process changed a context since the version in hand.
- `follow` reads a run another process is running, from the store's event log.
- Tickets: `secret` is the one every process reads, as it is now; `use_once` says yes to
  a ticket once across every process, and only while the secret that checked it is the
  shared one.
"""

from __future__ import annotations

import abc
import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from thinwire.runlog import Batch
from thinwire.stores.base import Event, Store

__all__ = ["Coordinator", "Lease", "RemoteRun"]


@dataclass(frozen=True)
class Lease:
    """A hold on a context, granted to this process until released or expired."""

    context_id: str
    #: Greater than the token of every grant before it.
    token: int


class Coordinator(abc.ABC):
    #: Seconds between the keep-alive calls of a running run (`renew`, `stop_requested`);
    #: None when no other process can take a lease away or ask for a stop.
    keepalive: float | None = None

    def __init__(self, *, lease_ttl: float) -> None:
        #: How long a lease outlives the process that holds it.
        self.lease_ttl = lease_ttl
        #: This process, as a lease owner.
        self.replica_id = "replica-" + secrets.token_hex(6)

    @abc.abstractmethod
    async def acquire(self, context_id: str) -> Lease | None:
        """Hold the context's lease for `lease_ttl` seconds; None if another owner holds
        it. Acquiring a lease this process holds already renews it with a new token."""

    @abc.abstractmethod
    async def renew(self, lease: Lease) -> bool:
        """Extend a lease still held; False if it was lost."""

    @abc.abstractmethod
    async def release(self, lease: Lease) -> None:
        """Give the lease up, if it is still held."""

    @abc.abstractmethod
    async def holder(self, context_id: str) -> str | None:
        """Which process holds the context's lease now, if any."""

    def fence(self, lease: Lease | None) -> int | None:
        """What a save under `lease` carries to be refused once the lease is lost."""
        return None

    async def stale(self, store: Store, context_id: str, version: int) -> bool:
        """Whether the stored context may be newer than `version`."""
        return False

    @abc.abstractmethod
    async def request_stop(self, run_id: str) -> None:
        """Ask whichever process runs `run_id` to stop it."""

    @abc.abstractmethod
    async def stop_requested(self, run_id: str) -> bool:
        """Whether a stop of `run_id` was asked for."""

    def follow(
        self,
        store: Store,
        context_id: str,
        run_id: str,
        after: int,
        *,
        heartbeat: float,
        still_running: Callable[[], Awaitable[bool]],
        closing: asyncio.Event | None = None,
    ) -> RemoteRun:
        """The frames of `run_id`, running on another process, after `after`; whether it
        still runs is asked as often as a lease could run out. Ends early once `closing`
        is set (this process stops: the client reattaches elsewhere)."""
        return RemoteRun(
            store,
            context_id,
            run_id,
            after,
            heartbeat,
            still_running,
            check_every=self.lease_ttl,
            closing=closing,
        )

    @abc.abstractmethod
    async def secret(self) -> bytes:
        """The secret every process of this deployment shares (it signs WebSocket
        tickets), as it is now: made by whichever process asks first, and made again if
        the store lost it."""

    @abc.abstractmethod
    async def use_once(self, key: str, ttl: float, secret: bytes) -> bool:
        """True the first time `key` (a WebSocket ticket, found genuine with `secret`) is
        offered on any process, remembered `ttl` seconds; False if it was offered before,
        or if `secret` is no longer the shared one (the store lost it, and the uses with
        it: a ticket signed with it could be used again)."""

    async def close(self) -> None:  # noqa: B027 - optional for coordinators with no resources
        """Release connections."""


class RemoteRun:
    """A run on another process, followed through the store's event log (a FrameSource).

    Every `check_every` seconds of silence it asks `still_running`, which records a run
    whose process died as interrupted (with a `done` frame, which this then reads), so a
    follower never waits for a dead run longer than a lease lasts; every `heartbeat`
    seconds of silence it yields a heartbeat.
    """

    def __init__(
        self,
        store: Store,
        context_id: str,
        run_id: str,
        after: int,
        heartbeat: float,
        still_running: Callable[[], Awaitable[bool]],
        *,
        check_every: float | None = None,
        closing: asyncio.Event | None = None,
    ) -> None:
        self.store = store
        self.context_id = context_id
        self.run_id = run_id
        self.after = after
        self.heartbeat = heartbeat
        self.still_running = still_running
        self.check_every = min(heartbeat, check_every or heartbeat)
        self.closing = closing or asyncio.Event()

    async def _next_events(self, timeout: float) -> list[Event] | None:
        """The next frames within `timeout` seconds ([] if none); None once closing."""
        reading = asyncio.ensure_future(
            self.store.follow_events(self.context_id, self.after, timeout=timeout)
        )
        closing = asyncio.ensure_future(self.closing.wait())
        await asyncio.wait([reading, closing], return_when=asyncio.FIRST_COMPLETED)
        closing.cancel()
        if not reading.done():
            reading.cancel()
            return None
        return reading.result()

    async def batches(self) -> AsyncIterator[Batch | None]:
        quiet_since = checked_at = time.monotonic()
        while not self.closing.is_set():
            # Wait until the next heartbeat or check is due, whichever comes first.
            now = time.monotonic()
            due = min(quiet_since + self.heartbeat, checked_at + self.check_every)
            events = await self._next_events(max(due - now, 0.0))
            if events is None:
                return
            if not events:
                now = time.monotonic()
                if now - quiet_since >= self.heartbeat:
                    quiet_since = now
                    yield None
                if now - checked_at >= self.check_every:
                    checked_at = now
                    await self.still_running()
                continue
            quiet_since = time.monotonic()
            batch = []
            for event in events:
                self.after = event.seq
                if event.run_id != self.run_id:
                    continue
                batch.append((event.seq, event.data))
                if json.loads(event.data).get("type") == "done":
                    yield batch
                    return
            if batch:
                yield batch
