"""Contexts: one conversation each, restored from the store and cached in an LRU.

The store is the truth; the registry keeps up to `max_contexts` live contexts (agent
instance plus loaded record) so a busy conversation is not re-read on every message. An
evicted context is simply loaded again, indistinguishable from one that stayed.

A context belongs to the principal that created it. Any other principal gets
`context_not_found`, exactly as for an id that does not exist.

Whoever changes a context holds it first (`hold`): a run, an operator's patch, a clear, a
forget. A second holder gets `context_busy`, so two runs never interleave and no write
lands in the middle of a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thinwire import wire
from thinwire.agent import Agent
from thinwire.errors import Conflict, DecisionPending, NotFound
from thinwire.ids import new_context_id
from thinwire.state import AgentState
from thinwire.stores import AuditEntry, ContextRecord, Event, Store

if TYPE_CHECKING:
    from thinwire.runs import RunLog

__all__ = ["Context", "ContextRegistry", "new_record", "public_turn"]

AgentFactory = Callable[[], Agent]

#: Frame seqs a run may use before its start is saved again. A killed run's context
#: resumes numbering past the lease, so no seq a client may have seen is ever reused.
SEQ_LEASE = 1_000_000


@dataclass(eq=False)
class Context:
    record: ContextRecord
    agent: Agent
    state: AgentState
    #: The run in progress, if any: at most one per context.
    run: RunLog | None = None
    #: Who is changing the context right now ("run", "operator", "clear", "forget").
    holder: str | None = None
    #: The fencing token of this replica's lease, while it holds the context.
    lease: int | None = None
    #: For a context not stored yet: the audit of its initial state, for its first save.
    initial_audit: list[AuditEntry] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def agent_name(self) -> str:
        return self.record.agent

    @property
    def history(self) -> list[dict[str, Any]]:
        return self.record.history

    @property
    def transcript(self) -> list[dict[str, Any]]:
        return self.record.transcript


def new_record(context_id: str, agent_name: str, agent: Agent, owner: str) -> ContextRecord:
    """A fresh conversation: the system prompt in its history, the initial state copied."""
    now = time.time()
    history: list[dict[str, Any]] = []
    if agent.system_prompt:
        history.append({"role": "system", "content": agent.system_prompt})
    state = AgentState(agent.initial_state).to_json()
    return ContextRecord(
        id=context_id,
        agent=agent_name,
        owner=owner,
        history=history,
        state=state,
        created_at=now,
        updated_at=now,
    )


def public_turn(
    role: str, text: str, tool_calls: Sequence[str] = (), stop_reason: str | None = None
) -> dict[str, Any]:
    """A transcript turn, built through its wire model: the transcript holds nothing a
    client may not see, so it can be sent as it is stored."""
    turn = wire.TranscriptTurn.model_validate(
        {"role": role, "text": text, "toolCalls": list(tool_calls), "stopReason": stop_reason}
    )
    return turn.model_dump(by_alias=True)


def not_found(context_id: str) -> NotFound:
    return NotFound("context_not_found", f"no context {context_id} for this agent")


class ContextRegistry:
    def __init__(
        self,
        store: Store,
        agents: Mapping[str, AgentFactory],
        *,
        max_contexts: int = 1000,
        lease_ttl: float = 10.0,
    ) -> None:
        self.store = store
        self.agents = agents
        self.max_contexts = max_contexts
        #: How long a replica's hold on a context outlives the replica: with a shared
        #: store, a context whose replica died is usable again after this.
        self.lease_ttl = lease_ttl
        #: This process, as a lease owner.
        self.replica_id = "replica-" + secrets.token_hex(6)
        self._live: OrderedDict[str, Context] = OrderedDict()
        self._loading: dict[str, asyncio.Lock] = {}

    def __len__(self) -> int:
        return len(self._live)

    def _context(self, record: ContextRecord) -> Context:
        agent = self.agents[record.agent]()
        state = AgentState(
            record.state, writable_keys=agent.writable_keys, source=f"agent:{record.agent}"
        )
        return Context(record=record, agent=agent, state=state)

    def _remember(self, context: Context) -> None:
        self._live[context.id] = context
        self._live.move_to_end(context.id)
        idle = [c for c in self._live.values() if c.holder is None]
        for stale in idle[: max(0, len(self._live) - self.max_contexts)]:
            del self._live[stale.id]

    def cached(self, context_id: str) -> Context | None:
        """The live context, if this process holds it (whoever owns it)."""
        return self._live.get(context_id)

    def forget_cached(self, context: Context) -> None:
        """Drop the cached copy; the next use reloads it from the store."""
        if self._live.get(context.id) is context:
            del self._live[context.id]

    def create(self, agent_name: str, owner: str) -> Context:
        """A new conversation, stored by its first save (the start of its first run, so
        the context and the user's first message land in one step). Until then it is
        nowhere but in the hands of its caller."""
        agent = self.agents[agent_name]()
        record = new_record(new_context_id(), agent_name, agent, owner)
        context = self._context(record)
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
            if self.store.shared and context.holder is None:
                # Another replica may have written since: the store is the truth.
                await self.refresh(context)
        if context is None or context.agent_name != agent_name:
            raise not_found(context_id)
        return context

    async def refresh(self, context: Context) -> None:
        """Take the stored record when it is newer than the one in hand."""
        record = await self.store.load(context.id)
        if record is None:
            self.forget_cached(context)
            raise not_found(context.id)
        if record.version != context.record.version:
            context.record = record
            context.state = AgentState(
                record.state,
                writable_keys=context.agent.writable_keys,
                source=f"agent:{record.agent}",
            )

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
                if record.active_run is not None:
                    await self.recover_dead_run(context)
                self._remember(context)
                return context
        finally:
            if not lock.locked():
                self._loading.pop(context_id, None)

    async def recover_dead_run(self, context: Context) -> None:
        """Record the marked run as interrupted if no process runs it any more."""
        if not self.store.shared:
            await self._record_killed_run(context)  # this process owns the store
            return
        if await self.store.lease_owner(context.id) is not None:
            return  # alive on a replica
        token = await self.store.acquire_lease(context.id, self.replica_id, self.lease_ttl)
        if token is None:
            return
        context.lease = token
        try:
            await self.refresh(context)
            if context.record.active_run is not None:
                await self._record_killed_run(context)
        finally:
            context.lease = None
            await self.store.release_lease(context.id, self.replica_id, token)

    async def _record_killed_run(self, context: Context) -> None:
        """A run was in progress when its process died: its turn ends as interrupted, and
        its event log with a `done` saying so, numbered past anything it could have sent."""
        record = context.record
        active = record.active_run
        assert active is not None
        record.add_message({"role": "assistant", "content": "", "stopReason": "interrupted"})
        record.add_turn(public_turn("assistant", "", stop_reason="interrupted"))
        record.last_seq = max(record.last_seq, active["seqLease"])
        record.active_run = None
        done = wire.DoneFrame(
            context_id=record.id,
            run_id=active["runId"],
            seq=record.last_seq,
            text="",
            tool_calls=[],
            stop_reason="interrupted",
        )
        event = Event(
            record.last_seq, active["runId"], done.model_dump_json(by_alias=True), time.time()
        )
        await self.save(context, events=[event])

    @contextlib.asynccontextmanager
    async def hold(self, context: Context, holder: str) -> AsyncIterator[None]:
        """Exclusive use of the context for the block, or `context_busy`."""
        await self.acquire(context, holder)
        try:
            yield
        finally:
            await self.release(context)

    async def acquire(self, context: Context, holder: str) -> None:
        """Hold the context, or `context_busy` — also when another replica holds it. While
        a decision is pending only the decision itself, a stop or a forget may: anything
        else is `decision_pending`."""
        if context.holder is not None:
            raise Conflict("context_busy", f"{context.id} is busy ({context.holder})")
        context.holder = holder
        try:
            if self.store.shared:
                token = await self.store.acquire_lease(context.id, self.replica_id, self.lease_ttl)
                if token is None:
                    raise Conflict("context_busy", f"{context.id} is busy on another replica")
                context.lease = token
                if context.record.version > 0:  # else it is not stored yet: nothing to reread
                    await self.refresh(context)
                if context.record.active_run is not None and context.run is None:
                    # Holding the lease, nobody else runs it: its replica died.
                    await self._record_killed_run(context)
            suspended = context.record.suspended
            if suspended is not None and holder not in ("decision", "stop", "forget"):
                raise DecisionPending(suspended["interrupt"]["interruptId"])
        except BaseException:
            await self.release(context)
            raise

    async def release(self, context: Context) -> None:
        context.holder = None
        if context.lease is not None:
            token, context.lease = context.lease, None
            with contextlib.suppress(Exception):  # it expires by itself anyway
                await self.store.release_lease(context.id, self.replica_id, token)

    async def renew(self, context: Context) -> bool:
        """Keep holding the context's lease; False when it was lost."""
        if context.lease is None:
            return True
        return await self.store.renew_lease(
            context.id, self.replica_id, context.lease, self.lease_ttl
        )

    async def save(
        self,
        context: Context,
        events: Sequence[Event] = (),
        trim_before: int | None = None,
        *,
        compact: bool = True,
    ) -> None:
        """Save the context's record and pending audit entries, compare-and-set.

        With `compact` (all but the save that starts a run) the history and transcript
        are held as text from here on: the context is at rest, and the text is what the
        store writes. On any failure (a `VersionConflict` included) the cached copy is
        dropped, so the next use sees the stored truth rather than changes that never
        landed.
        """
        record = context.record
        record.state = context.state.to_json()
        record.updated_at = time.time()
        audit = context.state.take_audit()
        if compact:
            record.compact()
        if record.version == 0:
            assert not events and trim_before is None, "a new context has no frames yet"
            await self.store.create(record, [*context.initial_audit, *audit])
            record.version, context.initial_audit = 1, []
            self._remember(context)
            return
        try:
            record.version = await self.store.save(
                record,
                expected_version=record.version,
                audit=audit,
                events=events,
                fence=context.lease,
                trim_before=trim_before,
            )
        except Exception:
            self.forget_cached(context)
            raise

    async def forget(self, context: Context) -> None:
        """Remove every trace of the context from the store and the cache."""
        async with self.hold(context, "forget"):
            await self.store.delete(context.id)
            self.forget_cached(context)
