"""The store for several replicas: everything in Redis, each save one Lua script.

    store = RedisStore.from_url("redis://127.0.0.1:6379/0", prefix="myapp")

Keys, under `prefix`:

    {p}:ctx:{id}      hash: agent, owner, version, data (the record but its exchanges, as
                      JSON), updated and summary (what the list shows), and sends (the
                      message ids of its send keys, as JSON: the record forgets old ones)
    {p}:ex:{id}       hash: an exchange per field "{line}:{depth}", valued
                      "{messages}\n{turns JSON}\n{messages JSON}"
    {p}:list:{n}:{owner}:{agent}  sorted set of an owner's conversations of an agent,
                      scored by when each was updated (n: the owner's length)
    {p}:audit:{id}    list of audit entries (JSON), appended with the save they belong to
    {p}:events:{id}   stream of frames, entry id "{seq}-1", expiring after `event_ttl` (the
                      app's, `keep_events_for`)
    {p}:send:{owner}:{message}  the context a first send created, expiring after `event_ttl`
    {p}:format        the data format (`FORMAT`) of everything under the prefix
    {p}:lease:{id}    "{owner} {token}" with a time to live: who may run the context
    {p}:fence:{id}    the last fencing token handed out
    {p}:stop:{run}    a stop requested for a run, wherever it runs

The last three are the coordinator's (`thinwire.coordination.redis`); they are named here
because a fenced save checks the lease in the same script.

A replica caches nothing it relies on: records are read from Redis when used, and a
save is a compare-and-set on the version (and, fenced, on the lease) run as one script,
so it lands whole or not at all. Conversations an earlier version kept whole (history and
transcript fields in the ctx hash) are moved into exchanges when the store opens.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from thinwire.branches import Position
from thinwire.errors import (
    AlreadyExists,
    DataFormatTooNew,
    LeaseLost,
    StoreError,
    VersionConflict,
)
from thinwire.exchanges import Exchange
from thinwire.jsontext import dumps
from thinwire.records import ContextRecord
from thinwire.stores.base import AuditEntry, AuditPage, Event, Store
from thinwire.stores.listing import Cursor, Summary

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from thinwire.coordination import Coordinator

__all__ = ["FORMAT", "RedisStore", "store_errors"]

#: The data format of what this release keeps under a prefix (the coordinator's keys
#: included), stamped in `{p}:format`. Raise it with any change an older release would
#: misread or spoil (a key, a field, a value stored another way), with a step in
#: `RedisStore.open` that moves data of the format before over: a release then refuses
#: data of a format above its own, rather than write to it. Data no release stamped
#: (written before formats were) is format 1.
FORMAT = 1

logger = logging.getLogger("thinwire.stores")

P = ParamSpec("P")
S = TypeVar("S")
T = TypeVar("T")

#: The client's read timeout (a URL's `socket_timeout=` sets another); a blocking read
#: waits at most `BLOCK`, or half the read timeout when that is shorter, at a time.
SOCKET_TIMEOUT = 10.0
BLOCK = 2.0
#: A pooled connection idle this long is checked before it is used again (a Redis
#: restart leaves every pooled connection dead).
HEALTH_CHECK_INTERVAL = 5

#: A frame appended again (a write retried after its answer was lost) is there already:
#: its id is not above the stream's last, which is no failure. Any other error of the
#: XADD (out of memory, a read-only replica) fails the script, not the frame unseen.
STORED = """
local function stored(reply)
  if type(reply) == 'table' and reply.err and not string.find(reply.err, 'equal or smaller') then
    error(reply)
  end
end
"""

CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'agent', ARGV[1], 'owner', ARGV[2], 'version', 1,
  'data', ARGV[3], 'summary', ARGV[4], 'updated', ARGV[5], 'sends', ARGV[8])
redis.call('ZADD', KEYS[4], ARGV[5], ARGV[6])
for i = 5, #KEYS do redis.call('SET', KEYS[i], ARGV[6], 'EX', ARGV[7]) end
local n = tonumber(ARGV[9])
for i = 0, n - 1 do redis.call('HSET', KEYS[3], ARGV[10 + i * 2], ARGV[11 + i * 2]) end
for i = 10 + n * 2, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
return 1
"""

SAVE = (
    STORED
    + """
local version = redis.call('HGET', KEYS[1], 'version')
if not version then return -1 end
if tonumber(version) ~= tonumber(ARGV[1]) then return tonumber(version) end
if ARGV[6] ~= '' then
  local lease = redis.call('GET', KEYS[4])
  if not lease or string.match(lease, '%S+$') ~= ARGV[6] then return -2 end
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'data', ARGV[3], 'summary', ARGV[4],
  'updated', ARGV[5])
redis.call('ZADD', KEYS[6], ARGV[5], ARGV[8])
if ARGV[7] ~= '' then
  redis.call('DEL', KEYS[5])
  redis.call('HDEL', KEYS[1], 'history', 'transcript')
end
local at = 9
local n = tonumber(ARGV[at])
for i = 1, n do redis.call('RPUSH', KEYS[2], ARGV[at + i]) end
at = at + n + 1
n = tonumber(ARGV[at])
for i = 0, n - 1 do redis.call('HSET', KEYS[5], ARGV[at + 1 + i * 2], ARGV[at + 2 + i * 2]) end
at = at + n * 2 + 1
local events = tonumber(ARGV[at])
for i = 0, events - 1 do
  local base = at + 1 + i * 4
  stored(redis.pcall('XADD', KEYS[3], ARGV[base] .. '-1',
    'run', ARGV[base + 1], 'data', ARGV[base + 2], 'time', ARGV[base + 3]))
end
if events > 0 then redis.call('EXPIRE', KEYS[3], ARGV[at + 1 + events * 4]) end
local trim = ARGV[at + 2 + events * 4]
if trim ~= '' then redis.call('XTRIM', KEYS[3], 'MINID', trim .. '-0') end
return 0
"""
)

#: A page of a list, newest first, with each conversation's summary: one round trip.
#: Ties on the time are ordered by id, as a sorted set orders equal scores.
LIST = """
local limit = tonumber(ARGV[1])
local found = {}
if ARGV[2] == '' then
  found = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, limit)
else
  local tied = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[2], ARGV[2], 'WITHSCORES')
  for i = #tied - 1, 1, -2 do
    if #found < limit * 2 and tied[i] < ARGV[3] then
      table.insert(found, tied[i])
      table.insert(found, tied[i + 1])
    end
  end
  if #found < limit * 2 then
    local rest = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(' .. ARGV[2], '-inf', 'WITHSCORES',
      'LIMIT', 0, limit - #found / 2)
    for _, value in ipairs(rest) do table.insert(found, value) end
  end
end
local page = {}
for i = 1, #found, 2 do
  local summary = redis.call('HGET', ARGV[4] .. found[i], 'summary')
  if summary then
    table.insert(page, found[i])
    table.insert(page, found[i + 1])
    table.insert(page, summary)
  end
end
return page
"""

#: A context's keys go (KEYS[1] its record, KEYS[2] its place in a list, then the others),
#: and each send key of it that still names it (ARGV[2] of them, the last keys): one that
#: expired and was made again for a later conversation is that conversation's.
DELETE = """
local existed = redis.call('EXISTS', KEYS[1])
local sends = tonumber(ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[1], unpack(KEYS, 3, #KEYS - sends))
for i = #KEYS - sends + 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
return existed
"""

APPEND = (
    STORED
    + """
for i = 0, (#ARGV - 1) / 4 - 1 do
  local base = 2 + i * 4
  stored(redis.pcall('XADD', KEYS[1], ARGV[base] .. '-1',
    'run', ARGV[base + 1], 'data', ARGV[base + 2], 'time', ARGV[base + 3]))
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
"""
)


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


def record_parts(record: ContextRecord) -> tuple[str, str, str, list[str]]:
    """The record's data, summary and updated fields and its changed exchanges as field,
    value pairs, serialised before any command: a non-JSON value changes nothing."""
    summary = Summary.of(record)
    exchanges: list[str] = []
    for exchange in record.changed_exchanges():
        exchanges += [exchange_field(exchange.position), exchange_value(exchange)]
    return (
        dumps(record.rest_json()),
        dumps(summary.to_json()),
        repr(summary.updated_at),
        exchanges,
    )


def exchange_field(position: Position) -> str:
    return f"{position.line}:{position.depth}"


def exchange_value(exchange: Exchange) -> str:
    # Compact JSON holds no raw newline: it separates the parts unambiguously.
    return f"{exchange.size}\n{exchange.turns_json()}\n{exchange.messages_json()}"


def parse_exchange(position: Position, value: str) -> Exchange:
    size, turns, messages = value.split("\n", 2)
    return Exchange(position, messages_json=messages, turns_json=turns, size=int(size))


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
        self.keep_events_for(event_ttl)
        options = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
        read_timeout = options.get("socket_timeout")
        self.block = min(BLOCK, read_timeout / 2) if read_timeout else BLOCK
        self._create: Any = client.register_script(CREATE)
        self._save: Any = client.register_script(SAVE)
        self._append: Any = client.register_script(APPEND)
        self._delete: Any = client.register_script(DELETE)
        self._list: Any = client.register_script(LIST)

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

    def describe(self) -> str:
        """Where the client connects, without its credentials; then the prefix."""
        pool = getattr(self.redis, "connection_pool", None)
        where = getattr(pool, "connection_kwargs", {})
        if "path" in where:
            url = f"unix://{where['path']}?db={where.get('db', 0)}"
        elif "host" in where:
            scheme = (
                "rediss" if "SSL" in getattr(pool, "connection_class", type).__name__ else "redis"
            )
            url = f"{scheme}://{where['host']}:{where.get('port', 6379)}/{where.get('db', 0)}"
        else:  # a client of another kind (a cluster's): only its kind
            url = type(self.redis).__name__
        return f"Redis {url}, prefix {self.prefix!r}"

    def coordinator(self, *, lease_ttl: float) -> Coordinator:
        from thinwire.coordination.redis import RedisCoordinator

        return RedisCoordinator(self, lease_ttl=lease_ttl)

    def key(self, kind: str, name: str) -> str:
        """The Redis key of one `kind` of thing ("ctx", "lease", "stop"…) named `name`."""
        return f"{self.prefix}:{kind}:{name}"

    def _keys(self, context_id: str) -> list[str]:
        return [self.key(kind, context_id) for kind in ("ctx", "audit", "events", "lease", "ex")]

    def _list_key(self, owner: str, agent: str) -> str:
        # The owner is free text: its length keeps "a:b" + "c" apart from "a" + "b:c".
        return self.key("list", f"{len(owner)}:{owner}:{agent}")

    @store_errors
    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        data, summary, updated, exchanges = record_parts(record)
        entries = [audit_json(entry, 1) for entry in audit]
        keys = [
            self.key("ctx", record.id),
            self.key("audit", record.id),
            self.key("ex", record.id),
            self._list_key(record.owner, record.agent),
        ]
        keys += [self._send_key(record.owner, message_id) for message_id in record.sends]
        args = [record.agent, record.owner, data, summary, updated, record.id, self.event_ttl]
        args += [json.dumps(list(record.sends)), len(exchanges) // 2, *exchanges, *entries]
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
        agent, owner, version, data, history, transcript = await self.redis.hmget(
            self.key("ctx", context_id),
            ["agent", "owner", "version", "data", "history", "transcript"],
        )
        if data is None:
            return None
        fields = json.loads(data)
        if history is not None:  # kept whole by an earlier version: made exchanges
            fields["history"] = json.loads(history)
            fields["transcript"] = json.loads(transcript or "[]")
        return ContextRecord.from_json(
            id=context_id, agent=agent, owner=owner, version=int(version), data=fields
        )

    @store_errors
    async def load_exchanges(
        self, context_id: str, positions: Sequence[Position]
    ) -> list[Exchange]:
        if not positions:
            return []
        values = await self.redis.hmget(
            self.key("ex", context_id), [exchange_field(p) for p in positions]
        )
        return [
            parse_exchange(position, value)
            for position, value in zip(positions, values, strict=True)
            if value is not None
        ]

    @store_errors
    async def list_contexts(
        self, owner: str, agent: str, limit: int, after: Cursor | None = None
    ) -> list[Summary]:
        args = [limit, "", "", self.key("ctx", "")]
        if after is not None:
            args[1:3] = [repr(after.updated_at), after.context_id]
        page = await self._list(keys=[self._list_key(owner, agent)], args=args)
        return [
            Summary.from_json(page[i], float(page[i + 1]), json.loads(page[i + 2]))
            for i in range(0, len(page), 3)
        ]

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
        data, summary, updated, exchanges = record_parts(record)
        entries = [audit_json(entry, version) for entry in audit]
        args = [expected_version, version, data, summary, updated]
        args += ["" if fence is None else fence, "1" if record.cleared else "", record.id]
        args += [len(entries), *entries, len(exchanges) // 2, *exchanges]
        args += [len(events), *event_args(events), self.event_ttl]
        args.append("" if trim_before is None else trim_before)
        keys = [*self._keys(record.id), self._list_key(record.owner, record.agent)]
        result = int(await self._save(keys=keys, args=args))
        if result == -2:
            raise LeaseLost(f"{record.id}: the lease of token {fence} is gone")
        if result != 0:
            raise VersionConflict(record.id, expected_version, None if result == -1 else result)
        return version

    @store_errors
    async def open(self) -> None:
        """Stamp the data with this release's format, unless it has one: then refuse a
        newer release's (`DataFormatTooNew`, nothing written). Then move conversations an
        earlier version kept whole into exchanges and the lists (each by a compare-and-set
        save: one a replica saves meanwhile is left to it)."""
        stamp = f"{self.prefix}:format"
        # Data no release stamped (or none yet) is format 1's. Set if absent, in one step:
        # replicas starting together stamp it once.
        await self.redis.set(stamp, 1, nx=True)
        found = int(await self.redis.get(stamp))
        if found > FORMAT:
            raise DataFormatTooNew(self.describe(), found, FORMAT)
        # A release that raises FORMAT moves older data over here, a step at a time from
        # the format found, each step stamping the format it reached.
        async for key in self.redis.scan_iter(match=self.key("ctx", "*"), count=500):
            if await self.redis.hexists(key, "summary"):
                continue
            context_id = key[len(self.key("ctx", "")) :]
            record = await self.load(context_id)
            if record is None:
                continue
            record.cleared = True  # write every exchange, drop the fields kept whole
            try:
                await self.save(record, expected_version=record.version)
            except VersionConflict:
                continue

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
        """Blocks in reads of at most `self.block` seconds, well inside the socket
        timeout: a silent run must not look like a dead connection."""
        key = self.key("events", context_id)
        deadline = time.monotonic() + timeout
        while True:
            block = min(self.block, max(0.001, deadline - time.monotonic()))
            answer = await self.redis.xread({key: f"{after}-1"}, block=int(block * 1000))
            if answer or time.monotonic() >= deadline:
                return self._events(answer[0][1]) if answer else []

    @store_errors
    async def trim_events(self, context_id: str, before_seq: int) -> None:
        key = self.key("events", context_id)
        await self.redis.xtrim(key, minid=f"{before_seq}-0", approximate=False)

    def keep_events_for(self, seconds: float) -> None:
        # Frames and send keys get it as they are written: what was written before keeps
        # the time it was given.
        self.event_ttl = max(1, math.ceil(seconds))

    @store_errors
    async def expire_events(self, before_time: float) -> int:
        return 0  # every event stream expires by itself, `event_ttl` after its last frame

    @store_errors
    async def probe_write(self) -> None:
        # A key that uses memory and expires by itself within a second: an appended
        # frame's stream would be kept `event_ttl`.
        await self.redis.set(self.key("probe", "writes"), 1, px=1000)

    @store_errors
    async def version(self, context_id: str) -> int | None:
        version = await self.redis.hget(self.key("ctx", context_id), "version")
        return None if version is None else int(version)

    @store_errors
    async def delete(self, context_id: str) -> bool:
        record_key = self.key("ctx", context_id)
        # What is read first is written once, by `create`; the keys then go in one script.
        agent, owner, sends = await self.redis.hmget(record_key, ["agent", "owner", "sends"])
        message_ids: list[str] = []
        if sends is not None:
            message_ids = json.loads(sends)
        elif owner is not None:  # created before the field was kept: the record's own
            message_ids = list(
                json.loads(await self.redis.hget(record_key, "data")).get("sends", {})
            )
        send_keys = [self._send_key(owner, message_id) for message_id in message_ids]
        keys = [record_key, self._list_key(owner or "", agent or "")]
        keys += [*self._keys(context_id)[1:], self.key("fence", context_id), *send_keys]
        return bool(await self._delete(keys=keys, args=[context_id, len(send_keys)]))

    @store_errors
    async def audit(self, context_id: str, key: str | None = None) -> list[AuditEntry]:
        entries = [
            # Entries written before runs were named have five fields.
            AuditEntry(*fields)
            for fields in map(
                json.loads, await self.redis.lrange(self.key("audit", context_id), 0, -1)
            )
        ]
        return [entry for entry in entries if key is None or entry.key == key]

    @store_errors
    async def audit_page(
        self,
        context_id: str,
        *,
        limit: int,
        key: str | None = None,
        before: int | None = None,
        after: int | None = None,
    ) -> AuditPage:
        """Every key's: the list's range alone (entry n is item n - 1; a save only
        appends). One key's are found in the whole list."""
        if key is not None:
            return await super().audit_page(
                context_id, limit=limit, key=key, before=before, after=after
            )
        name = self.key("audit", context_id)
        length = await self.redis.llen(name)
        if after is not None:
            start, stop, more = after, min(after + limit, length), after + limit < length
        else:
            stop = length if before is None else min(before - 1, length)
            start, more = max(0, stop - limit), stop > limit
        found = await self.redis.lrange(name, start, stop - 1) if start < stop else []
        return AuditPage(
            [(n, AuditEntry(*json.loads(item))) for n, item in enumerate(found, start + 1)], more
        )

    async def close(self) -> None:
        await self.redis.aclose()


def audit_json(entry: AuditEntry, version: int) -> str:
    return json.dumps(
        [entry.key, entry.value, entry.time, entry.source, version, entry.run_id],
        allow_nan=False,
    )
