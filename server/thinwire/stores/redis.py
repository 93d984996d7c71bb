"""The store for several replicas: everything in Redis, each save one Lua script.

    store = RedisStore.from_url("redis://127.0.0.1:6379/0", prefix="myapp")

Keys, under `prefix`:

    {p}:ctx:{id}      hash: agent, owner, version, history and transcript (JSON arrays),
                      data (the rest of the record as JSON)
    {p}:audit:{id}    list of audit entries (JSON), appended with the save they belong to
    {p}:events:{id}   stream of frames, entry id "{seq}-1", expiring after `event_ttl`
    {p}:send:{owner}:{message}  the context a first send created, expiring after `event_ttl`
    {p}:lease:{id}    "{owner} {token}" with a time to live: who may run the context
    {p}:fence:{id}    the last fencing token handed out
    {p}:stop:{run}    a stop requested for a run, wherever it runs

The last three are the coordinator's (`thinwire.coordination.redis`); they are named here
because a fenced save checks the lease in the same script.

A replica caches nothing it relies on: records are read from Redis when used, and a
save is a compare-and-set on the version (and, fenced, on the lease) run as one script,
so it lands whole or not at all.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from thinwire.errors import AlreadyExists, LeaseLost, StoreError, VersionConflict
from thinwire.jsontext import dumps
from thinwire.records import ContextRecord, TranscriptView
from thinwire.stores.base import AuditEntry, Event, Store

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from thinwire.coordination import Coordinator

__all__ = ["RedisStore", "store_errors"]

logger = logging.getLogger("thinwire.stores")

P = ParamSpec("P")
S = TypeVar("S")
T = TypeVar("T")

#: The client's read timeout; a blocking read waits at most `BLOCK` of it at a time.
SOCKET_TIMEOUT = 10.0
BLOCK = 2.0
#: A pooled connection idle this long is checked before it is used again (a Redis
#: restart leaves every pooled connection dead).
HEALTH_CHECK_INTERVAL = 5

CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'agent', ARGV[1], 'owner', ARGV[2], 'version', 1,
  'data', ARGV[3], 'history', ARGV[4], 'transcript', ARGV[5])
for i = 3, #KEYS do redis.call('SET', KEYS[i], ARGV[6], 'EX', ARGV[7]) end
for i = 8, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
return 1
"""

SAVE = """
local version = redis.call('HGET', KEYS[1], 'version')
if not version then return -1 end
if tonumber(version) ~= tonumber(ARGV[1]) then return tonumber(version) end
if ARGV[6] ~= '' then
  local lease = redis.call('GET', KEYS[4])
  if not lease or string.match(lease, '%S+$') ~= ARGV[6] then return -2 end
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'data', ARGV[3], 'history', ARGV[4],
  'transcript', ARGV[5])
local n = tonumber(ARGV[7])
for i = 1, n do redis.call('RPUSH', KEYS[2], ARGV[7 + i]) end
local at = 8 + n
local events = tonumber(ARGV[at])
for i = 0, events - 1 do
  local base = at + 1 + i * 4
  redis.pcall('XADD', KEYS[3], ARGV[base] .. '-1',
    'run', ARGV[base + 1], 'data', ARGV[base + 2], 'time', ARGV[base + 3])
end
if events > 0 then redis.call('EXPIRE', KEYS[3], ARGV[at + 1 + events * 4]) end
local trim = ARGV[at + 2 + events * 4]
if trim ~= '' then redis.call('XTRIM', KEYS[3], 'MINID', trim .. '-0') end
return 0
"""

APPEND = """
for i = 0, (#ARGV - 1) / 4 - 1 do
  local base = 2 + i * 4
  redis.pcall('XADD', KEYS[1], ARGV[base] .. '-1',
    'run', ARGV[base + 1], 'data', ARGV[base + 2], 'time', ARGV[base + 3])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
"""


def store_errors(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """The driver's errors leave as `StoreError`; what Redis said goes to the log only."""

    async def mapped(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await method(self, *args, **kwargs)
        except require_redis().RedisError as exc:
            logger.warning("redis failed in %s: %r", method.__name__, exc)
            raise StoreError("the store is unavailable; try again shortly") from exc

    functools.update_wrapper(mapped, method)
    return mapped


def require_redis() -> Any:
    try:
        import redis.asyncio
    except ImportError as exc:
        raise ImportError(
            'RedisStore needs the redis client: pip install "thinwire[redis]"'
        ) from exc
    return redis.asyncio


def record_parts(record: ContextRecord) -> list[str]:
    """The record's data, history and transcript fields, serialised before any command:
    a non-JSON value changes nothing."""
    return [dumps(record.rest_json()), record.history_json(), record.transcript_json()]


def event_args(events: Sequence[Event]) -> list[Any]:
    """XADD arguments, in seq order: a stream only grows."""
    args: list[Any] = []
    for event in sorted(events, key=lambda event: event.seq):
        args += [event.seq, event.run_id, event.data, repr(event.time)]
    return args


class RedisStore(Store):
    """Records as hashes, audit trails as lists, event logs as streams; every save one
    script. Its coordinator (`RedisCoordinator`) keeps leases in the same Redis, which
    the save script checks for the fence."""

    def __init__(
        self, client: Redis, *, prefix: str = "thinwire", event_ttl: float = 86400
    ) -> None:
        # Typed loosely: with decode_responses the client returns str, which its
        # annotations cannot express.
        self.redis: Any = client
        self.prefix = prefix
        self.event_ttl = max(1, int(event_ttl))
        self._create: Any = client.register_script(CREATE)
        self._save: Any = client.register_script(SAVE)
        self._append: Any = client.register_script(APPEND)

    @classmethod
    def from_url(
        cls, url: str, *, prefix: str = "thinwire", event_ttl: float = 86400
    ) -> RedisStore:
        """A store over a new client: a command that meets a dead connection is tried
        once more on a fresh one, and idle connections are checked before use."""
        redis = require_redis()
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        client = redis.from_url(
            url,
            decode_responses=True,
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=2.0,
            health_check_interval=HEALTH_CHECK_INTERVAL,
            retry=Retry(NoBackoff(), 1),
            retry_on_error=[redis.ConnectionError],
        )
        return cls(client, prefix=prefix, event_ttl=event_ttl)

    def coordinator(self, *, lease_ttl: float) -> Coordinator:
        from thinwire.coordination.redis import RedisCoordinator

        return RedisCoordinator(self, lease_ttl=lease_ttl)

    def key(self, kind: str, name: str) -> str:
        """The Redis key of one `kind` of thing ("ctx", "lease", "stop"…) named `name`."""
        return f"{self.prefix}:{kind}:{name}"

    def _keys(self, context_id: str) -> list[str]:
        return [self.key(kind, context_id) for kind in ("ctx", "audit", "events", "lease")]

    @store_errors
    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        parts = record_parts(record)
        entries = [audit_json(entry, 1) for entry in audit]
        keys = [self.key("ctx", record.id), self.key("audit", record.id)]
        keys += [self._send_key(record.owner, message_id) for message_id in record.sends]
        args = [record.agent, record.owner, *parts, record.id, self.event_ttl, *entries]
        if not await self._create(keys=keys, args=args):
            raise AlreadyExists(record.id)

    def _send_key(self, owner: str, message_id: str) -> str:
        # The owner is free text: its length keeps "a:b" + "c" apart from "a" + "b:c".
        return self.key("send", f"{len(owner)}:{owner}:{message_id}")

    @store_errors
    async def find_send(self, owner: str, message_id: str) -> str | None:
        """Kept `event_ttl`, the window a retry comes in."""
        context_id = await self.redis.get(self._send_key(owner, message_id))
        if not context_id or not await self.redis.exists(self.key("ctx", context_id)):
            return None  # never created, or deleted since
        return str(context_id)

    @store_errors
    async def load(self, context_id: str) -> ContextRecord | None:
        stored = await self.redis.hgetall(self.key("ctx", context_id))
        if not stored or "data" not in stored:
            return None
        # History and transcript stay text until a run uses them (absent: a record
        # written whole into data by an earlier version).
        return ContextRecord.from_json(
            id=context_id,
            agent=stored["agent"],
            owner=stored["owner"],
            version=int(stored["version"]),
            data=json.loads(stored["data"]),
            history_json=stored.get("history"),
            transcript_json=stored.get("transcript"),
        )

    @store_errors
    async def load_transcript(self, context_id: str) -> TranscriptView | None:
        """Reads the transcript field and the small part of the record, not the history."""
        agent, owner, data, transcript = await self.redis.hmget(
            self.key("ctx", context_id), ["agent", "owner", "data", "transcript"]
        )
        if data is None:
            return None
        return TranscriptView.stored(agent, owner, data, transcript)

    @store_errors
    async def save(
        self,
        record: ContextRecord,
        *,
        expected_version: int,
        audit: Sequence[AuditEntry] = (),
        events: Sequence[Event] = (),
        fence: int | None = None,
        trim_before: int | None = None,
    ) -> int:
        version = expected_version + 1
        parts = record_parts(record)
        entries = [audit_json(entry, version) for entry in audit]
        args = [expected_version, version, *parts, "" if fence is None else fence, len(entries)]
        args += [*entries, len(events), *event_args(events), self.event_ttl]
        args.append("" if trim_before is None else trim_before)
        result = int(await self._save(keys=self._keys(record.id), args=args))
        if result == -2:
            raise LeaseLost(f"{record.id}: the lease of token {fence} is gone")
        if result != 0:
            raise VersionConflict(record.id, expected_version, None if result == -1 else result)
        return version

    @store_errors
    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        if events:
            key = self.key("events", context_id)
            await self._append(keys=[key], args=[self.event_ttl, *event_args(events)])

    def _events(self, entries: list[Any]) -> list[Event]:
        return [
            Event(
                seq=int(entry_id.split("-")[0]),
                run_id=f["run"],
                data=f["data"],
                time=float(f["time"]),
            )
            for entry_id, f in entries
        ]

    @store_errors
    async def read_events(self, context_id: str, after: int = 0) -> list[Event]:
        entries = await self.redis.xrange(self.key("events", context_id), f"{after + 1}-0", "+")
        return self._events(entries)

    @store_errors
    async def follow_events(self, context_id: str, after: int, timeout: float) -> list[Event]:
        """Blocks in reads of at most `BLOCK` seconds, well inside the socket timeout: a
        silent run must not look like a dead connection."""
        key = self.key("events", context_id)
        deadline = time.monotonic() + timeout
        while True:
            block = min(BLOCK, max(0.001, deadline - time.monotonic()))
            answer = await self.redis.xread({key: f"{after}-1"}, block=int(block * 1000))
            if answer or time.monotonic() >= deadline:
                return self._events(answer[0][1]) if answer else []

    @store_errors
    async def trim_events(self, context_id: str, before_seq: int) -> None:
        key = self.key("events", context_id)
        await self.redis.xtrim(key, minid=f"{before_seq}-0", approximate=False)

    @store_errors
    async def expire_events(self, before_time: float) -> int:
        return 0  # every event stream expires by itself, `event_ttl` after its last frame

    @store_errors
    async def version(self, context_id: str) -> int | None:
        version = await self.redis.hget(self.key("ctx", context_id), "version")
        return None if version is None else int(version)

    @store_errors
    async def delete(self, context_id: str) -> bool:
        keys = [*self._keys(context_id), self.key("fence", context_id)]
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.exists(self.key("ctx", context_id))
            pipe.delete(*keys)
            existed, _ = await pipe.execute()
        return bool(existed)

    @store_errors
    async def audit(self, context_id: str, key: str | None = None) -> list[AuditEntry]:
        entries = [
            AuditEntry(key=k, value=v, time=t, source=s, version=n)
            for k, v, t, s, n in map(
                json.loads, await self.redis.lrange(self.key("audit", context_id), 0, -1)
            )
        ]
        return [entry for entry in entries if key is None or entry.key == key]

    async def close(self) -> None:
        await self.redis.aclose()


def audit_json(entry: AuditEntry, version: int) -> str:
    return json.dumps([entry.key, entry.value, entry.time, entry.source, version], allow_nan=False)
