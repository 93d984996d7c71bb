"""Readiness: whether the store takes writes, for `/readyz`.

A store may answer reads while it refuses writes: a full disk, Redis out of memory or
made a read-only replica. A readiness check that only reads says ready then, while every
send fails. So a write the store refuses as unavailable (`store_unavailable`; not a
conflict, which is the store answering) marks it, and while it is marked `/readyz`
answers 503. To learn when the store takes writes again with no user's send, a check
probes a write of its own (`Store.probe_write`): one at a time and at most one every
PROBE_INTERVAL, however often a balancer asks. A probe or a save that lands clears the
mark; a flush of a run's frames only marks it when refused (flushes go 20 a second: a
check's probe is what says writes land again). A check the store does not answer within
CHECK_TIMEOUT (a Redis stopped or cut off by a partition) says not ready too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterator

from thinwire.errors import StoreError
from thinwire.stores import Store

__all__ = ["CHECK_TIMEOUT", "PROBE_INTERVAL", "Writes", "in_time"]

logger = logging.getLogger("thinwire")

#: Seconds from one probe of a store that refused a write to the next.
PROBE_INTERVAL = 1.0
#: Seconds a readiness check waits for the store. A store that hangs answers a request
#: only when its driver gives up (redis-py: a 10 s socket timeout, tried twice); a
#: balancer must hear "not ready" long before that.
CHECK_TIMEOUT = 2.0


async def in_time(check: Awaitable[None]) -> None:
    """`check`, or `store_unavailable` once it has taken CHECK_TIMEOUT."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT):
            await check
    except TimeoutError:
        raise StoreError(
            f"the store did not answer within {CHECK_TIMEOUT:g} s; try again shortly"
        ) from None


class Writes:
    """Whether the store takes writes, as this server last saw."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        #: A write was refused as unavailable, and none has landed since.
        self.refused = False
        #: Refusals so far: a write that lands clears the mark only if none came meanwhile.
        self._refusals = 0
        self._probing = False
        self._next_probe = -math.inf

    def failed(self, exc: BaseException) -> None:
        """A write failed with `exc`: the store is marked if it refused it as unavailable."""
        if isinstance(exc, StoreError) and exc.code == "store_unavailable":
            self.refused = True
            self._refusals += 1

    @contextlib.contextmanager
    def watching(self, *, clears: bool = True) -> Iterator[None]:
        """Around a write: a refusal marks the store; with `clears`, the write landing
        clears the mark, unless another write was refused while it went."""
        refusals = self._refusals
        try:
            yield
        except BaseException as exc:
            self.failed(exc)
            raise
        if clears and self._refusals == refusals:
            self.refused = False

    async def check(self, store: Store) -> None:
        """`store_unavailable` while the store is marked; a probe first, if one is due."""
        if self.refused and not self._probing and self.clock() >= self._next_probe:
            self._probing = True
            self._next_probe = self.clock() + PROBE_INTERVAL
            try:
                with self.watching():
                    await store.probe_write()
            except StoreError:
                pass  # refused again: the store logged why
            except Exception:
                logger.warning("probing whether the store takes writes failed", exc_info=True)
            finally:
                self._probing = False
        if self.refused:
            raise StoreError("the store refuses writes; try again shortly")
