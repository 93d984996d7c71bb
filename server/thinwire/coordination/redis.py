"""The coordinator of replicas sharing a Redis store: leases with fencing tokens, stop
requests and version checks, all in the store's Redis."""

from __future__ import annotations

import math
import secrets
from typing import Any

from thinwire.coordination.base import Coordinator, Lease
from thinwire.stores.base import Store
from thinwire.stores.redis import RedisStore, store_errors

__all__ = ["RedisCoordinator"]

# A lease is one key, "owner token", expiring with the lease; the store's save script
# checks it for the fence. Tokens come from a counter per context that never goes back.
ACQUIRE = """
local lease = redis.call('GET', KEYS[1])
if lease and string.match(lease, '^%S+') ~= ARGV[1] then return false end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'PX', ARGV[2])
return token
"""

RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# The secret that signs WebSocket tickets, made by whichever replica asks first. Redis may
# lose it (a restart without persistence, FLUSHDB, eviction); the next replica to ask then
# makes a new one, and every replica converges on it: `Tickets` signs each ticket with the
# secret as read now, rereads it when a signature fails with the copy in hand, and a
# ticket is used only while the secret that checked it is still this key (USE_ONCE).
# Nothing writes an old secret back: the uses of its tickets were lost with it, so those
# tickets must not open a socket again, on an old replica or a new one.
SECRET = """
local secret = redis.call('GET', KEYS[1])
if secret then return secret end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
"""

# A ticket's use: one key, expiring soon after the ticket; set only under the secret that
# found the ticket genuine, so a copy of a lost secret accepts nothing.
USE_ONCE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('SET', KEYS[2], 1, 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""

#: How long a stop request waits for its run.
STOP_TTL = 3600


class RedisCoordinator(Coordinator):
    def __init__(self, store: RedisStore, *, lease_ttl: float = 10.0) -> None:
        super().__init__(lease_ttl=lease_ttl)
        self.store = store
        self.redis: Any = store.redis
        self.keepalive = lease_ttl / 3
        self._acquire: Any = self.redis.register_script(ACQUIRE)
        self._renew: Any = self.redis.register_script(RENEW)
        self._release: Any = self.redis.register_script(RELEASE)
        self._secret_script: Any = self.redis.register_script(SECRET)
        self._use_once: Any = self.redis.register_script(USE_ONCE)

    def _ttl_ms(self) -> int:
        return max(1, int(self.lease_ttl * 1000))

    @store_errors
    async def acquire(self, context_id: str) -> Lease | None:
        keys = [self.store.key("lease", context_id), self.store.key("fence", context_id)]
        token = await self._acquire(keys=keys, args=[self.replica_id, self._ttl_ms()])
        return Lease(context_id, int(token)) if token else None

    @store_errors
    async def renew(self, lease: Lease) -> bool:
        keys = [self.store.key("lease", lease.context_id)]
        value = f"{self.replica_id} {lease.token}"
        return bool(await self._renew(keys=keys, args=[value, self._ttl_ms()]))

    @store_errors
    async def release(self, lease: Lease) -> None:
        keys = [self.store.key("lease", lease.context_id)]
        await self._release(keys=keys, args=[f"{self.replica_id} {lease.token}"])

    @store_errors
    async def holder(self, context_id: str) -> str | None:
        lease = await self.redis.get(self.store.key("lease", context_id))
        return str(lease).split(" ")[0] if lease else None

    def fence(self, lease: Lease | None) -> int | None:
        return None if lease is None else lease.token

    @store_errors
    async def stale(self, store: Store, context_id: str, version: int) -> bool:
        return await store.version(context_id) != version

    @store_errors
    async def secret(self) -> bytes:
        keys = [self.store.key("secret", "tickets")]
        return bytes.fromhex(await self._secret_script(keys=keys, args=[secrets.token_hex(32)]))

    @store_errors
    async def use_once(self, key: str, ttl: float, secret: bytes) -> bool:
        keys = [self.store.key("secret", "tickets"), self.store.key("used", key)]
        args = [secret.hex(), max(1, math.ceil(ttl * 1000))]
        return bool(await self._use_once(keys=keys, args=args))

    @store_errors
    async def request_stop(self, run_id: str) -> None:
        await self.redis.set(self.store.key("stop", run_id), 1, ex=STOP_TTL)

    @store_errors
    async def stop_requested(self, run_id: str) -> bool:
        return bool(await self.redis.exists(self.store.key("stop", run_id)))
