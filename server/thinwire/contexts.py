"""Contexts: one conversation each, restored from the store and cached in an LRU.

The store is the truth; the registry keeps up to `max_contexts` live contexts (agent
instance plus loaded record) so a busy conversation is not re-read on every message. An
evicted context is simply loaded again, indistinguishable from one that stayed.

A context belongs to the principal that created it. Any other principal gets
`context_not_found`, exactly as for an id that does not exist.

Whoever changes a context holds it first (`hold`): a run, an operator's patch, a rename, a
clear, a forget. A second holder gets `context_busy` while a run holds it, so two runs
never interleave and no write lands in the middle of a run; one that finds a change of one
write holding it (a rename, say) waits for it here, so a send right after a rename is not
refused. Holding means the coordinator's lease too, so this holds across replicas (where
a change on another replica is `context_busy` still); the coordinator also says when a
cached record may be stale and whether a run marked active is alive anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thinwire import wire
from thinwire.agent import Agent
from thinwire.coordination import Coordinator, Lease
from thinwire.errors import AgentFailed, Conflict, DecisionPending, NotFound, StoreError
from thinwire.exchanges import History
from thinwire.ids import new_context_id
from thinwire.metrics import METRICS
from thinwire.readiness import Writes
from thinwire.records import ContextRecord
from thinwire.runlog import encode_frame, shown
from thinwire.state import AgentState, check_key
from thinwire.stores import AuditEntry, Event, Store
from thinwire.stores.listing import Summary

if TYPE_CHECKING:
    from thinwire.runlog import RunLog

__all__ = ["AgentFactory", "Context", "ContextRegistry", "new_record", "not_found"]

AgentFactory = Callable[[], Agent]

logger = logging.getLogger("thinwire")

#: The bytes the live contexts may hold, by default (see `ContextRecord.weight`).
DEFAULT_CACHE_BYTES = 128 * 1024 * 1024

#: The holders that keep a context as long as a run takes: anyone else is refused. Every
#: other holder makes one change and lets go, so anyone else waits for it.
RUNS = frozenset({"run", "decision"})


@dataclass(eq=False)
class Context:
    record: ContextRecord
    agent: Agent
    state: AgentState
    #: The log of the run in progress here, if any: at most one per context.
    log: RunLog | None = None
    #: Who is changing the context right now ("run", "operator", "clear", "forget").
    holder: str | None = None
    #: Set as the holder lets go: what a request waiting for a change waits on.
    released: asyncio.Event | None = None
    #: Deleted by `forget`: a request that had it in hand finds it gone.
    forgotten: bool = False
    #: This process's lease on the context, while it holds it.
    lease: Lease | None = None
    #: For a context not stored yet: the audit of its initial state, for its first save.
    initial_audit: list[AuditEntry] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def agent_name(self) -> str:
        return self.record.agent

    @property
    def history(self) -> History:
        return self.record.history

    @property
    def transcript(self) -> list[dict[str, Any]]:
        return self.record.transcript


def new_record(context_id: str, agent_name: str, agent: Agent, owner: str) -> ContextRecord:
    """A fresh conversation: the system prompt in its history, the initial state copied."""
    now = time.time()
    preamble: list[dict[str, Any]] = []
    if agent.system_prompt:
        preamble.append({"role": "system", "content": agent.system_prompt})
    for key in agent.initial_state:
        check_key(key, f"{type(agent).__name__}.initial_state")
    state = AgentState(agent.initial_state).to_json()
    return ContextRecord(
        id=context_id,
        agent=agent_name,
        owner=owner,
        preamble=preamble,
        state=state,
        created_at=now,
        updated_at=now,
    )


def agent_failed(what: str) -> AgentFailed:
    """Log the exception being handled under a reference; the client gets the reference."""
    reference = "err-" + secrets.token_hex(6)
    logger.exception("%s (%s)", what, reference)
    return AgentFailed(reference)


def busy() -> Conflict:
    """What a person is told: pages show it as it is, so it names nothing internal."""
    return Conflict(
        "context_busy", "The conversation is busy with a reply or a change; try again when it ends."
    )


def not_found(context_id: str) -> NotFound:
    return NotFound("context_not_found", f"no context {context_id} for this agent")


class ContextRegistry:
    def __init__(
        self,
        store: Store,
        agents: Mapping[str, AgentFactory],
        *,
        coordinator: Coordinator | None = None,
        max_contexts: int = 1000,
        max_context_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.store = store
        self.agents = agents
        self.coordinator = coordinator or store.coordinator(lease_ttl=10.0)
        #: Whether the store takes writes, as the last ones went (`/readyz`).
        self.writes = Writes()
        self.max_contexts = max_contexts
        self.max_context_bytes = max_context_bytes
        self._live: OrderedDict[str, Context] = OrderedDict()
        #: What each live context weighs (`ContextRecord.weight`), and their sum.
        self._weights: dict[str, int] = {}
        self.cached_bytes = 0
        self._loading: dict[str, asyncio.Lock] = {}

    def __len__(self) -> int:
        return len(self._live)

    def _new_agent(self, name: str) -> Agent:
        """An instance from the agent's factory. Whatever it raises, a ThinwireError with
        a message of the app's included, stays in the log (it may hold a key, a URL)."""
        try:
            return self.agents[name]()
        except Exception as exc:
            raise agent_failed(f"creating an agent {name!r} failed") from exc

    def _context(self, record: ContextRecord) -> Context:
        agent = self._new_agent(record.agent)
        return Context(record=record, agent=agent, state=self._state(record, agent))

    @staticmethod
    def _state(record: ContextRecord, agent: Agent) -> AgentState:
        return AgentState(
            record.state,
            writable_keys=agent.writable_keys,
            source=f"agent:{record.agent}",
            max_value_bytes=agent.max_state_value_bytes,
        )

    def _remember(self, context: Context) -> None:
        """Cache the context (the most recently used), then drop the least recently used
        idle ones while the cache holds more contexts or more bytes than it may."""
        self._live[context.id] = context
        self._live.move_to_end(context.id)
        self._weigh(context)
        self._evict(keep=context)

    def _evict(self, keep: Context) -> None:
        """Drop idle contexts, least recently used first, but never `keep`: its caller is
        about to use it, and a second request meanwhile must find this copy, not load
        another (two copies would each let a run start)."""
        # Checked first, as every save calls this: a scan of the cache would cost a send
        # more than the rest of its bookkeeping.
        while len(self._live) > self.max_contexts or self.cached_bytes > self.max_context_bytes:
            stale = next(
                (c for c in self._live.values() if c.holder is None and c is not keep), None
            )
            if stale is None:
                return  # every context is in use: the cache may run over until they rest
            self._drop(stale)

    def _weigh(self, context: Context) -> None:
        weight = context.record.weight
        self.cached_bytes += weight - self._weights.get(context.id, 0)
        self._weights[context.id] = weight

    def _drop(self, context: Context) -> None:
        del self._live[context.id]
        self.cached_bytes -= self._weights.pop(context.id, 0)

    def cached(self, context_id: str) -> Context | None:
        """The live context, if this process holds it (whoever owns it)."""
        return self._live.get(context_id)

    def forget_cached(self, context: Context) -> None:
        """Drop the cached copy; the next use reloads it from the store."""
        if self._live.get(context.id) is context:
            self._drop(context)

    def create(self, agent_name: str, owner: str, context_id: str | None = None) -> Context:
        """A new conversation (under `context_id`, or a new id), stored by its first save
        (the start of its first run, so the context and the user's first message land in
        one step). Until then it is nowhere but in the hands of its caller."""
        agent = self._new_agent(agent_name)
        try:
            record = new_record(context_id or new_context_id(), agent_name, agent, owner)
            state = self._state(record, agent)
        except Exception as exc:
            # The app's mistake (an initial_state that is not JSON, from a function making
            # agents: create_app checks a class's), not the client's: logged, a 500.
            raise agent_failed(f"starting a conversation with agent {agent_name!r} failed") from exc
        context = Context(record=record, agent=agent, state=state)
        now = record.created_at
        context.initial_audit = [
            AuditEntry(key, value, now, "system") for key, value in record.state.items()
        ]
        return context

    async def get(self, agent_name: str, context_id: str, principal: str) -> Context:
        """The context, or `context_not_found` — also when it belongs to another agent or
        another principal."""
        context = await self.get_for_operator(agent_name, context_id)
        if context.record.owner != principal:
            raise not_found(context_id)
        return context

    async def get_for_operator(self, agent_name: str, context_id: str) -> Context:
        """The context whoever owns it: for the operator API only."""
        context = self._live.get(context_id)
        if context is None:
            context = await self._load(context_id)
        else:
            self._live.move_to_end(context_id)
            if context.holder is None:
                await self.refresh(context)
                await self.recover_dead_run(context)
        if context is None or context.agent_name != agent_name:
            raise not_found(context_id)
        return context

    async def refresh(self, context: Context) -> None:
        """Take the stored record when another process may have written a newer one."""
        record = context.record
        if not await self.coordinator.stale(self.store, context.id, record.version):
            return
        stored = await self.store.load(context.id)
        if stored is None:
            self.forget_cached(context)
            raise not_found(context.id)
        if stored.version != record.version:
            await self.load_branch(stored, context.agent)
            context.record = stored
            context.state = self._state(stored, context.agent)

    async def load_branch(self, record: ContextRecord, agent: Agent) -> None:
        """What a run of `agent` reads of the branch shown: its `history_window`."""
        await self.store.load_branch(record, agent.history_window)

    async def _load(self, context_id: str) -> Context | None:
        lock = self._loading.setdefault(context_id, asyncio.Lock())
        try:
            async with lock:
                if context_id in self._live:  # loaded while this call waited
                    return self._live[context_id]
                record = await self.store.load(context_id)
                if record is None or record.agent not in self.agents:
                    return None
                context = self._context(record)
                await self.load_branch(record, context.agent)
                if await self.recover_dead_run(context):
                    self._remember(context)
                return context
        finally:
            if not lock.locked():
                self._loading.pop(context_id, None)

    async def run_alive(self, context: Context) -> bool:
        """Whether the run marked active on the context runs anywhere: here, or on a
        process that holds the context's lease."""
        if context.log is not None:
            return True
        return await self.coordinator.holder(context.id) is not None

    async def recover_dead_run(self, context: Context) -> bool:
        """Record the marked run as interrupted if no process runs it any more. False when
        that could not be saved: the context in hand is then not the stored one."""
        if context.record.active_run is None or await self.run_alive(context):
            return True
        lease = await self.coordinator.acquire(context.id)
        if lease is None:
            return True  # taken meanwhile: alive after all
        context.lease = lease
        try:
            await self.refresh(context)
            if context.record.active_run is not None:
                await self._record_killed_run(context)
            return True
        except StoreError:
            # A read must not fail for it: the next use records the run again.
            logger.warning("recording the killed run of %s failed", context.id, exc_info=True)
            return False
        finally:
            context.lease = None
            with contextlib.suppress(StoreError):
                await self.coordinator.release(lease)

    async def listed(self, agent_name: str, page: Sequence[Summary]) -> list[Summary]:
        """A page of a list as it is shown. A conversation the store marks running whose
        run no process runs any more is recorded as interrupted first, as reading it would
        record it, and shown as recorded: by its new `updated_at`, the most recently
        active. Only those are loaded: a page with no run marked costs nothing more."""
        if all(summary.status != "running" for summary in page):
            return list(page)
        shown: list[Summary] = []
        for summary in page:
            found = await self._as_it_runs(agent_name, summary)
            if found is not None:  # else forgotten since the page was read
                shown.append(found)
        shown.sort(key=lambda summary: (summary.updated_at, summary.context_id), reverse=True)
        return shown

    async def _as_it_runs(self, agent_name: str, summary: Summary) -> Summary | None:
        """The summary, its dead run recorded if it is marked running; None if the
        conversation is gone. When that cannot be told (the store or the coordinator
        failing, the agent's factory), the store's summary: the list must not fail."""
        context_id = summary.context_id
        live = self._live.get(context_id)
        if summary.status != "running" or (live is not None and live.log is not None):
            return summary  # a run here holds its context in the cache till it ends
        try:
            if await self.coordinator.holder(context_id) is not None:
                return summary  # alive on another process (or just ended: a later list says)
            context = await self.get_for_operator(agent_name, context_id)
        except NotFound:
            return None
        except (StoreError, AgentFailed):
            logger.warning(
                "listing %s: whether its run is alive is not known", context_id, exc_info=True
            )
            return summary
        return Summary.of(context.record)

    async def _record_killed_run(self, context: Context) -> None:
        """A run was in progress when its process died: its turn ends as interrupted with
        the text, thinking and tools its flushed frames showed, and its event log with a
        `done` saying so, numbered past anything it could have sent. A run someone asked
        to stop ends as stopped: its process can no longer say so, and the person asked
        for no more."""
        record = context.record
        assert record.active_run is not None
        run_id = record.active_run.run_id
        stopped = await self.coordinator.stop_requested(run_id)
        stop_reason: wire.StopReason = "stopped" if stopped else "interrupted"
        last = record.last_run
        after = last.first_seq - 1 if last is not None and last.run_id == run_id else 0
        events = await self.store.read_events(context.id, after)
        frames = [e.data for e in events if e.run_id == run_id]
        text, calls, thinking = shown(frames)
        now = time.time()
        killed = record.end_killed_run(
            text, calls, thinking=thinking, at=now, stop_reason=stop_reason
        )
        if killed.kept is not None:  # what the run it resumed wrote before it asked
            context.state.restore_with_writes(killed.kept)
        done = encode_frame(
            wire.DoneFrame,
            record.id,
            run_id,
            record.last_seq,
            text=text,
            tool_calls=[call["name"] for call in calls],
            stop_reason=stop_reason,
        )
        await self.save(context, events=[Event(record.last_seq, run_id, done, now)])

    @contextlib.asynccontextmanager
    async def hold(self, context: Context, holder: str) -> AsyncIterator[None]:
        """Exclusive use of the context for the block, or `context_busy`."""
        await self.acquire(context, holder)
        try:
            yield
        finally:
            await self.release(context)

    async def acquire(self, context: Context, holder: str) -> None:
        """Hold the context, or `context_busy` — while a run holds it, or another process
        does; a change held here (not a run) is waited for first. While a decision is
        pending only the decision itself, a stop, a forget or a rename (it changes nothing
        the waiting run reads) may: anything else is `decision_pending`."""
        waited = False
        while context.holder is not None and context.holder not in RUNS:
            assert context.released is not None
            await context.released.wait()
            waited = True
        if context.forgotten:
            raise not_found(context.id)
        if context.holder is not None:
            raise busy()
        live = self._live.get(context.id)
        if live is not context and (live is not None or waited):
            # This copy was evicted while its caller waited, and another loaded since
            # (that one is the conversation here now, and may be running), or the change
            # waited for dropped it (its save failed): the next request loads the truth.
            raise busy()
        context.holder = holder
        context.released = asyncio.Event()
        if live is None and context.record.version > 0:
            self._remember(context)  # held, it must be the copy every request finds
        try:
            with self.writes.watching(clears=False):  # a write, with a shared store
                lease = await self.coordinator.acquire(context.id)
            if lease is None:
                raise busy()  # on another replica
            context.lease = lease
            if context.record.version > 0:  # else it is not stored yet: nothing to reread
                await self.refresh(context)
            if context.record.active_run is not None and context.log is None:
                # Holding the lease, nobody else runs it: its process died.
                await self._record_killed_run(context)
            checkpoint = context.record.checkpoint
            if checkpoint is not None and holder not in ("decision", "stop", "forget", "rename"):
                raise DecisionPending(checkpoint.interrupt_id)
        except BaseException:
            await self.release(context)
            raise

    async def release(self, context: Context) -> None:
        context.holder = None
        if context.released is not None:
            context.released.set()
            context.released = None
        if context.lease is not None:
            lease, context.lease = context.lease, None
            with contextlib.suppress(Exception):  # it expires by itself anyway
                await self.coordinator.release(lease)

    async def renew(self, context: Context) -> bool:
        """Keep holding the context's lease; False when it was lost."""
        return context.lease is None or await self.coordinator.renew(context.lease)

    async def save(
        self,
        context: Context,
        events: Sequence[Event] = (),
        trim_before: int | None = None,
        *,
        compact: bool = True,
    ) -> None:
        """Save the context's record, its changed exchanges and pending audit entries,
        compare-and-set.

        With `compact` (all but the save that starts a run) the exchanges saved are held
        as text from here on: the context is at rest, and the text is what the store
        writes. On any failure (a `VersionConflict` included) the cached copy is dropped,
        so the next use sees the stored truth rather than changes that never landed.
        """
        record = context.record
        record.state = context.state.to_json()
        record.updated_at = time.time()
        audit = context.state.take_audit()
        if record.version == 0:
            assert not events and trim_before is None, "a new context has no frames yet"
            with self.writes.watching(), METRICS.saving():
                await self.store.create(record, [*context.initial_audit, *audit])
            record.version, context.initial_audit = 1, []
            record.saved(compact=compact)
            self._remember(context)
            return
        try:
            with self.writes.watching(), METRICS.saving():
                record.version = await self.store.save(
                    record,
                    expected_version=record.version,
                    audit=audit,
                    events=events,
                    fence=self.coordinator.fence(context.lease),
                    trim_before=trim_before,
                )
        except Exception:
            self.forget_cached(context)
            raise
        record.saved(compact=compact)
        if self._live.get(context.id) is context:
            self._weigh(context)
            self._evict(keep=context)

    async def forget(self, context: Context) -> None:
        """Remove every trace of the context from the store and the cache."""
        async with self.hold(context, "forget"):
            await self.store.delete(context.id)
            context.forgotten = True
            self.forget_cached(context)
