"""AgentServer: what the server can do, whatever the transport.

HTTP routes (`routes.py`) and the WebSocket endpoint (`websocket.py`) both translate
requests into these operations, so SSE and WebSocket clients get exactly the same
behaviour: start a run, follow one, stop one, read, clear or forget a conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any

import jsonschema
from starlette.requests import HTTPConnection

from thinwire import wire
from thinwire.agent import Agent
from thinwire.branches import WHOLE, Page, Position, parse_turn_id
from thinwire.contexts import (
    DEFAULT_CACHE_BYTES,
    AgentFactory,
    Context,
    ContextRegistry,
    not_found,
)
from thinwire.coordination import Coordinator
from thinwire.errors import BadRequest, Conflict, Misconfigured, NotFound, StoreError, quoted
from thinwire.exchanges import Exchange, Message
from thinwire.identity import Identify, principal_of
from thinwire.ids import validate_context_id
from thinwire.jsontext import is_unicode
from thinwire.limits import Cap, RateLimiter
from thinwire.metrics import METRICS
from thinwire.records import TITLE_LENGTH, ContextRecord, json_array, plain, visible
from thinwire.runlog import FrameSource, Retagged, RunLog, StoredFrames
from thinwire.runner import begin_run, execute
from thinwire.stores import Store
from thinwire.stores.base import PROBE_CONTEXT
from thinwire.stores.listing import Summary, decode_cursor, encode_cursor
from thinwire.tickets import Tickets
from thinwire.turns import exchange_of, names_turn, no_such_turn

__all__ = ["AgentServer", "running"]

logger = logging.getLogger("thinwire")

#: The agent servers started in this process (so `thinwire serve` can drain them).
RUNNING: weakref.WeakSet[AgentServer] = weakref.WeakSet()


def running() -> list[AgentServer]:
    return list(RUNNING)


#: Seconds a cancelled run gets to record its end, on shutdown: one whose agent swallows
#: the cancellation is then left to run, rather than holding shutdown with no bound.
CANCEL_GRACE = 3.0


class AgentServer:
    """The state behind one app: its agents, its contexts and the runs in flight."""

    def __init__(
        self,
        agents: Mapping[str, AgentFactory],
        *,
        identify: Identify,
        store: Store,
        coordinator: Coordinator | None = None,
        max_contexts: int,
        max_context_bytes: int = DEFAULT_CACHE_BYTES,
        lease_ttl: float = 10.0,
        max_message_bytes: int,
        max_body_bytes: int,
        max_data_bytes: int = 16 * 1024,
        heartbeat_interval: float | None,
        send_timeout: float,
        event_ttl: float,
        allowed_origins: Sequence[str] = (),
        limiter: RateLimiter | None = None,
        max_runs: int = 16,
        max_streams: int = 32,
    ) -> None:
        self.agents = dict(agents)
        self.identify = identify
        self.store = store
        self.coordinator = coordinator or store.coordinator(lease_ttl=lease_ttl)
        self.contexts = ContextRegistry(
            store,
            self.agents,
            coordinator=self.coordinator,
            max_contexts=max_contexts,
            max_context_bytes=max_context_bytes,
        )
        self.max_message_bytes = max_message_bytes
        self.max_body_bytes = max_body_bytes
        self.max_data_bytes = max_data_bytes
        self.heartbeat_interval = heartbeat_interval
        self.send_timeout = send_timeout
        self.event_ttl = event_ttl
        store.keep_events_for(event_ttl)
        #: Pages of other origins whose WebSockets may act with this site's cookies.
        self.allowed_origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)
        self.limiter = limiter
        #: Runs in progress per principal (on this process).
        self.runs = Cap(
            max_runs, "too_many_runs", "runs may be in progress at once; wait for one to end"
        )
        #: Open streams per principal. A client left open holds one: the message says so.
        self.streams = Cap(
            max_streams,
            "too_many_streams",
            "streams (SSE responses, WebSockets and the runs they follow) may be open at once "
            "for this user: close clients you no longer use",
        )
        #: The operator API's bearer token, when it is mounted.
        self.operator_tokens: tuple[str, ...] = ()
        #: The path the app is mounted at (`thinwire.mount`), "" when it is served alone:
        #: what the startup log puts before the operator API's `/admin`.
        self.mounted_at = ""
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._janitor: asyncio.Task[None] | None = None
        #: Runs that went on after being cancelled at shutdown: not waited for again.
        self._ignored_cancel: set[asyncio.Task[None]] = set()
        #: Signs WebSocket tickets with the coordinator's secret; made at startup.
        self.tickets: Tickets | None = None
        #: Set when the server stops: open streams end.
        self.closing = asyncio.Event()

    def agent_name(self, name: str) -> str:
        if name not in self.agents:
            raise NotFound("agent_not_found", f"no agent named {quoted(name)}")
        return name

    async def principal(self, connection: HTTPConnection) -> str:
        return await principal_of(connection, self.identify)

    async def context(self, agent_name: str, context_id: str, principal: str) -> Context:
        """The context, if `principal` owns it; `context_not_found` otherwise."""
        return await self.contexts.get(agent_name, validate_context_id(context_id), principal)

    async def send(
        self,
        agent_name: str,
        principal: str,
        context_id: str | None,
        text: str,
        *,
        data: dict[str, Any] | None = None,
        message_id: str | None = None,
        request_id: str | None = None,
        new_context_id: str | None = None,
        after_turn_id: str | None = None,
    ) -> FrameSource:
        """A user's message: the frames of the run it starts — or, sent again with the
        same `message_id` (a retry of a send whose answer was lost), of the run the first
        one started, from its `run_start`, which then names this `request_id`. Without a
        `context_id` it starts a conversation, under `new_context_id` when given (an id
        another protocol derived; taken already, the start is refused). With
        `after_turn_id`, the last turn the client shows, it goes on the branch that ends
        with that turn's exchange (see `begin_run`)."""
        if message_id is not None:
            repeated = await self._repeated(
                agent_name, principal, context_id, message_id, new_context_id
            )
            if repeated is not None:
                return await self._again(*repeated, request_id)
        log = await self.start(
            agent_name,
            principal,
            context_id,
            text,
            data=data,
            message_id=message_id,
            request_id=request_id,
            new_context_id=new_context_id,
            after_turn_id=after_turn_id,
        )
        return log.follow(0, self.heartbeat_interval)

    async def _again(self, context: Context, run_id: str, request_id: str | None) -> FrameSource:
        """The frames of the run a first try of a command started."""
        frames = await self.follow(context, 0, run_id=run_id)
        if frames is None:
            raise Conflict(
                "message_already_sent",
                "this message was sent already; its reply is in the transcript",
            )
        return Retagged(frames, request_id)

    async def _repeated(
        self,
        agent_name: str,
        principal: str,
        context_id: str | None,
        message_id: str,
        new_context_id: str | None = None,
    ) -> tuple[Context, str] | None:
        """The context and run a send of `message_id` started already, if one did."""
        if context_id is None:  # a new conversation: did the first try create one?
            created = await self.store.find_send(principal, message_id)
            # Under an id derived from another protocol's (a thread, a chat), only that
            # one: the same message id sent to start another is a new message.
            if created is None or new_context_id not in (None, created):
                return None
            try:
                context = await self.context(agent_name, created, principal)
            except NotFound:  # a conversation with another agent: not a retry of this send
                raise Conflict(
                    "message_already_sent",
                    "this messageId was sent already, to another agent: send under a new id",
                ) from None
        else:
            context = await self.context(agent_name, context_id, principal)
        run_id = context.record.sends.get(message_id)
        return None if run_id is None else (context, run_id)

    async def start(
        self,
        agent_name: str,
        principal: str,
        context_id: str | None,
        text: str,
        *,
        data: dict[str, Any] | None = None,
        message_id: str | None = None,
        request_id: str | None = None,
        new_context_id: str | None = None,
        after_turn_id: str | None = None,
    ) -> RunLog:
        """Start a run; it goes on whether or not anyone follows it."""
        if after_turn_id is not None:
            if context_id is None:  # a new conversation has no turn to follow
                raise BadRequest(
                    "invalid_request",
                    "afterTurnId names a turn of a conversation: give its contextId",
                )
            parse_turn_id(after_turn_id)  # its form, before anything; the turn once held
        with self._admitted(principal) as release:
            if context_id is None:
                context = self.contexts.create(agent_name, principal, new_context_id)
            else:
                context = await self.context(agent_name, context_id, principal)
            return await self._run(
                context, text, data, message_id, request_id, release, after=after_turn_id
            )

    @contextlib.contextmanager
    def _admitted(self, principal: str) -> Iterator[Callable[[], None]]:
        """Room for one more run of `principal` (`too_many_runs`, `rate_limited`): yields
        the function that frees it, which the run calls as it ends, or this does if the
        run never starts."""
        release = self.runs.open(principal)
        try:
            if self.limiter is not None:
                self.limiter.take(principal)
            yield release
        except BaseException:
            release()
            raise

    async def _run(
        self,
        context: Context,
        text: str | None,
        data: dict[str, Any] | None,
        message_id: str | None,
        request_id: str | None,
        release: Callable[[], None],
        fork: Callable[[ContextRecord], Position] | None = None,
        *,
        after: str | None = None,
        through: str | None = None,
    ) -> RunLog:
        """Start a run on `text` — without, on the message `fork` answers again (a
        regenerate; see `begin_run`)."""
        log = await begin_run(
            self.contexts,
            context,
            text,
            data=data,
            message_id=message_id,
            request_id=request_id,
            fork=fork,
            after=after,
            through=through,
        )
        if text is None:  # the message answered again, as the run recorded it
            asked = context.record.running_exchange.messages[0]
            text, data = asked["content"], asked.get("data")
        self._spawn(log, execute(self.contexts, context, log, text, data=data), release)
        return log

    async def regenerate(
        self,
        context: Context,
        *,
        turn_id: str | None = None,
        message_id: str | None = None,
        request_id: str | None = None,
    ) -> FrameSource:
        """Answer the last user message of the branch shown again, in a new exchange
        beside its own: the reply it replaces stays, as the sibling before it. With
        `turn_id` (the reply the client shows last), of the branch that ends with that
        turn's exchange, shown first if it is another (see `begin_run`). The message is
        found once the context is held, so a regenerate is refused as a send is:
        `context_busy` or `decision_pending` before anything its turn says."""
        if message_id is not None and message_id in context.record.sends:
            return await self._again(context, context.record.sends[message_id], request_id)
        if turn_id is not None:
            parse_turn_id(turn_id)  # its form, before anything; the turn once held

        def again(record: ContextRecord) -> Position:
            # The branch shown ends with `turn_id`'s exchange now (`begin_run` showed it).
            last_message(record.latest_exchange)  # else `nothing_to_regenerate`
            assert record.lines.leaf is not None
            return record.lines.leaf

        with self._admitted(context.record.owner) as release:
            log = await self._run(
                context, None, None, message_id, request_id, release, again, after=turn_id
            )
        return log.follow(0, self.heartbeat_interval)

    async def edit(
        self,
        context: Context,
        turn_id: str,
        text: str,
        *,
        data: dict[str, Any] | None = None,
        message_id: str | None = None,
        request_id: str | None = None,
    ) -> FrameSource:
        """Send `text` in place of the user's turn `turn_id`, on a new branch from the
        messages before it; the reply streams as for a send. The turn may be on a branch
        not shown (a tab left on it): the latest branch through it is shown first. The turn
        is found once the context is held, so an edit is refused as a send is first."""
        if message_id is not None and message_id in context.record.sends:
            return await self._again(context, context.record.sends[message_id], request_id)
        parse_turn_id(turn_id)  # its form, before anything; the turn once held

        def edited(record: ContextRecord) -> Position:
            return user_turn(record, turn_id)

        with self._admitted(context.record.owner) as release:
            log = await self._run(
                context, text, data, message_id, request_id, release, edited, through=turn_id
            )
        return log.follow(0, self.heartbeat_interval)

    async def switch_branch(self, context: Context, turn_id: str, index: int) -> int:
        """Show alternative `index` of the exchange holding `turn_id` (on any branch), and
        the latest branch that goes on from it; the depth of that exchange."""
        async with self.contexts.hold(context, "branch"):
            record = context.record
            await self.store.load_branch(record)
            position = await exchange_of(self.store, record.id, turn_id, record)
            siblings = record.lines.siblings(position)
            if index >= len(siblings):
                count = len(siblings)
                raise NotFound(
                    "branch_not_found",
                    f"that turn has {count} alternative{'' if count == 1 else 's'}",
                )
            record.show(siblings[index])
            await self.store.load_branch(record)
            record.recount()
            await self.contexts.save(context)
        return position.depth

    async def rename(self, context: Context, title: str) -> None:
        """The user names the conversation: no agent renames it after that."""
        if not is_unicode(title):
            raise BadRequest("invalid_request", "title: not valid Unicode")
        title = plain(title)  # as a title is kept: what it says, on one line
        if not visible(title):  # blank, or nothing but control and format characters
            raise BadRequest("invalid_request", "title: must not be blank")
        if len(title) > TITLE_LENGTH:
            raise BadRequest("title_too_long", f"a title is at most {TITLE_LENGTH} characters")
        async with self.contexts.hold(context, "rename"):
            context.record.name(title, "user")
            await self.contexts.save(context)

    async def conversations(
        self, agent_name: str, principal: str, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        """A page of the principal's conversations of the agent, most recently active
        first (`wire.ConversationPage`)."""
        after = decode_cursor(cursor) if cursor else None
        found = await self.store.list_contexts(principal, agent_name, limit + 1, after)
        page = found[:limit]
        shown = await self.contexts.listed(agent_name, page)
        return {
            "conversations": [summary.to_wire() for summary in shown],
            # Where the store's page ended: a run recorded as killed moved its entry.
            "nextCursor": encode_cursor(page[-1]) if len(found) > limit else None,
        }

    def summary(self, context: Context) -> dict[str, Any]:
        """The context as the list shows it (`wire.ConversationSummary`)."""
        return Summary.of(context.record).to_wire()

    async def decide(
        self, context: Context, interrupt_id: str, value: Any, *, request_id: str | None = None
    ) -> FrameSource:
        """Answer the pending interrupt and resume its run by replay: its frames."""
        checkpoint = context.record.waiting_for(interrupt_id)
        check_decision(checkpoint.interrupt, value)
        with self._admitted(context.record.owner) as release:
            log = await begin_run(
                self.contexts,
                context,
                None,
                answering=interrupt_id,
                decision=value,
                request_id=request_id,
            )
            METRICS.answered(context.agent_name)
            work = execute(
                self.contexts,
                context,
                log,
                checkpoint.text,
                checkpoint.journal_with(value),
                data=checkpoint.data,
            )
            self._spawn(log, work, release)
        return log.follow(0, self.heartbeat_interval)

    def _spawn(
        self, log: RunLog, work: Coroutine[Any, Any, None], release: Callable[[], None]
    ) -> None:
        task = asyncio.create_task(work)
        self._runs[log.run_id] = task

        def ended(_: asyncio.Task[None]) -> None:
            self._runs.pop(log.run_id, None)
            release()

        task.add_done_callback(ended)

    async def follow(
        self,
        context: Context,
        after: int,
        *,
        run_id: str | None = None,
        heartbeat: float | None = None,
    ) -> FrameSource | None:
        """The latest run's frames after `after`, then live ones until `done`; None when
        there is nothing to send. With `run_id`, only if that run is the latest. A
        heartbeat comes after `heartbeat` seconds of silence (default: the server's
        `heartbeat_interval`), for a transport whose clients expect one that often."""
        if heartbeat is None:
            heartbeat = self.heartbeat_interval
        log = context.log
        if log is not None:
            if run_id not in (None, log.run_id) or (log.seqs and after > log.seqs[-1]):
                return None  # a cursor past all it sent is no reader's of this run
            return log.follow(after, heartbeat)
        active = context.record.active_run
        if active is not None:  # on another process, which the coordinator reaches
            if run_id not in (None, active.run_id):
                return None

            async def still_running() -> bool:
                await self.contexts.refresh(context)
                await self.contexts.recover_dead_run(context)
                return context.record.active_run is not None

            return self.coordinator.follow(
                self.store,
                context.id,
                active.run_id,
                after,
                heartbeat=heartbeat or 15.0,
                still_running=still_running,
                closing=self.closing,
            )
        last = context.record.last_run
        if last is None or last.stopped_waiting or run_id not in (None, last.run_id):
            return None
        events = await self.store.read_events(context.id, max(after, last.first_seq - 1))
        frames = [(e.seq, e.data) for e in events if e.run_id == last.run_id]
        return StoredFrames(frames) if frames else None

    async def kept_frames(self, context: Context) -> list[tuple[int, str]]:
        """Every frame the event log keeps of the conversation, in order: its latest two
        runs', for `event_ttl` (`follow` sends the latest's)."""
        return [(event.seq, event.data) for event in await self.store.read_events(context.id)]

    async def stop(self, context: Context) -> dict[str, Any]:
        """Cancel the run in progress (it ends with stop reason `stopped`), or end the
        run that waits for a decision."""
        if context.record.checkpoint is not None:
            async with self.contexts.hold(context, "stop"):
                checkpoint = context.record.end_waiting_run()
                if checkpoint.kept is not None:  # what the run wrote before it asked
                    context.state.restore_with_writes(checkpoint.kept)
                await self.contexts.save(context)
            return stop_result(context, checkpoint.run_id, stopping=True)
        log = context.log
        task = self._runs.get(log.run_id) if log else None
        if log is not None and task is not None and not log.finished:
            log.stop_requested = True
            task.cancel()
        active = context.record.active_run
        if log is None and active is not None:
            await self.coordinator.request_stop(active.run_id)  # it runs on another process
            return stop_result(context, active.run_id, stopping=True)
        return stop_result(context, log.run_id if log else None, bool(log and log.stop_requested))

    async def read_transcript(
        self, agent_name: str, context_id: str, principal: str, page: Page = WHOLE
    ) -> bytes:
        """`GET` of a conversation (a page of it), as JSON. A context this process does
        not hold is answered from the store's transcript alone, without restoring it:
        reading a long conversation back parses none of its history and fills no cache."""
        validate_context_id(context_id)
        if self.contexts.cached(context_id) is None:
            view = await self.store.load_transcript(context_id, page)
            if view is None or view.agent != agent_name or view.owner != principal:
                raise not_found(context_id)
            if view.turns is None:
                raise no_such_turn()
            if view.active_run is None:  # else: a run to find alive or record as killed
                if page.before_turn is not None:  # its exchange is there: is the turn?
                    await exchange_of(self.store, context_id, page.before_turn)
                return encode_transcript(
                    context_id,
                    agent_name,
                    view.title,
                    view.turns,
                    None,
                    view.pending_interrupt,
                    has_earlier=view.has_earlier,
                )
        context = await self.context(agent_name, context_id, principal)
        return await self.transcript(context, page)

    async def transcript(self, context: Context, page: Page = WHOLE) -> bytes:
        """A page of a live context's public transcript (the branch shown by default), as
        JSON: the exchanges in hand as they are, the others as stored."""
        record = context.record
        window = record.lines.window(page)
        if window is None:
            raise no_such_turn()
        if page.before_turn is not None:
            await exchange_of(self.store, record.id, page.before_turn, record)
        return encode_transcript(
            context.id,
            context.agent_name,
            record.title,
            await self.store.window_turns(record.id, window, record.exchanges),
            active_run_id(context),
            record.pending_interrupt,
            has_earlier=window.has_earlier,
        )

    async def clear(self, context: Context) -> None:
        """Drop the conversation history, and the frames of its runs with it; keep
        AgentState, the audit trail and the id."""
        async with self.contexts.hold(context, "clear"):
            record = context.record
            record.clear()
            await self.contexts.save(context, trim_before=record.last_seq + 1)

    async def forget(self, context: Context) -> None:
        await self.contexts.forget(context)

    async def check_store(self) -> None:
        """`store_unavailable` unless the store answers a read and, once it refused a
        write, takes one again (`readiness.py`): reads work on a full disk."""
        await self.store.version(PROBE_CONTEXT)  # a round trip that finds nothing
        await self.contexts.writes.check(self.store)

    async def startup(self) -> None:
        """Refuse to start with a store that does not answer or an agent that cannot be
        made: one clear message now, rather than an error on the first request."""
        try:
            await self.check_store()
            await self.store.open()
        except StoreError as exc:
            raise Misconfigured(f"the store does not answer: {exc.__cause__ or exc}") from exc
        except OSError as exc:  # its files, for a store that has some
            raise Misconfigured(f"the store cannot be opened: {exc}") from exc
        for name, factory in self.agents.items():
            try:
                factory()
            except Exception as exc:
                raise Misconfigured(f"the agent {name!r} cannot be created: {exc!r}") from exc
        self.tickets = Tickets(self.coordinator)
        self.closing = asyncio.Event()
        self._janitor = asyncio.create_task(self._expire_events())
        RUNNING.add(self)
        # Leases name the replica that holds a conversation; the log says which one this is.
        logger.info(
            "serving %s as %s, store: %s, operator API: %s",
            ", ".join(self.agents),
            self.coordinator.replica_id,
            self.store.describe(),
            f"on, at {self.mounted_at}/admin" if self.operator_tokens else "off",
        )

    async def _expire_events(self) -> None:
        """Event logs outlive connections and restarts, but not `event_ttl`."""
        while True:
            try:
                await self.store.expire_events(time.time() - self.event_ttl)
            except Exception:
                logger.warning("expiring old events failed", exc_info=True)
            await asyncio.sleep(min(3600.0, self.event_ttl / 4))

    async def drain(self, grace: float) -> None:
        """When the process is asked to stop, before its connections are closed: runs in
        flight get `grace` seconds to finish, then end as interrupted (each with its
        recorded `done`), and every stream still open ends cleanly — a client reattaches
        elsewhere and loses nothing."""
        runs = list(self._runs.values())
        if runs:
            logger.info("stopping: %d run(s) in flight get %g s to finish", len(runs), grace)
            _, late = await asyncio.wait(runs, timeout=grace)
            logger.info(
                "stopping: %d run(s) finished, %d interrupted", len(runs) - len(late), len(late)
            )
            await self._cancel(late)
        else:
            logger.info("stopping: no runs in flight")
        self.closing.set()

    async def _cancel(self, runs: Iterable[asyncio.Task[None]]) -> None:
        """Cancel `runs`, and give them `CANCEL_GRACE` seconds to record their end. A run
        still going then has an agent that swallowed its cancellation (`except
        BaseException`): shutdown goes on without it, saying so. (`asyncio.run` still
        waits for it before it returns; `thinwire serve` on SIGTERM exits all the same,
        as uvicorn raises the signal again once its shutdown is done.)"""
        waited = []
        for task in runs:
            task.cancel()
            if task not in self._ignored_cancel:
                waited.append(task)
        if not waited:
            return
        ended, going_on = await asyncio.wait(waited, timeout=CANCEL_GRACE)
        for task in ended:  # retrieved, so that none is reported as never retrieved
            if not task.cancelled():
                task.exception()
        if going_on:
            self._ignored_cancel |= going_on
            logger.warning(
                "%d run(s) ignored their cancellation (their agent catches CancelledError "
                "and goes on): shutdown goes on without them; a process left waiting for "
                "them can be killed safely, their turns recover as interrupted",
                len(going_on),
            )

    async def shutdown(self) -> None:
        """Bring runs in flight to a recorded end (`interrupted`), then close the store."""
        RUNNING.discard(self)
        self.closing.set()
        if self._janitor is not None:
            self._janitor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._janitor
        await self._cancel(list(self._runs.values()))
        for factory in self.agents.values():
            if isinstance(factory, type) and issubclass(factory, Agent):
                await factory.aclose()
        await self.coordinator.close()
        await self.store.close()


def encode_transcript(
    context_id: str,
    agent: str,
    title: str | None,
    turns: Sequence[bytes],
    active_run: str | None,
    pending_interrupt: Mapping[str, Any] | None,
    *,
    has_earlier: bool = False,
) -> bytes:
    """A `Transcript` body. Everything but the turns goes through the wire model; the
    turns, public by construction (`public_turn`), are spliced in as stored."""
    rest = wire.Transcript(
        context_id=context_id,
        agent=agent,
        title=title,
        turns=[],
        active_run_id=active_run,
        pending_interrupt=(
            wire.InterruptRequest.model_validate(pending_interrupt) if pending_interrupt else None
        ),
        has_earlier=has_earlier,
    ).model_dump_json(by_alias=True, exclude={"turns"})
    return json_array(turns, before=b'{"turns":', after=b"," + rest[1:].encode())


def last_message(exchange: Exchange | None) -> Message:
    """The user message a regenerate of the last exchange of a branch answers again."""
    messages = exchange.messages if exchange is not None else []
    if not messages or messages[0].get("role") != "user":
        raise Conflict("nothing_to_regenerate", "the conversation has no message to answer")
    return messages[0]


def shown_turn(record: ContextRecord, turn_id: str) -> tuple[Position, str]:
    """The exchange of a turn on the branch shown and the turn's role ("u" or "a");
    `turn_not_found` for any other id."""
    position, role, _ = parse_turn_id(turn_id)
    exchange = record.exchanges.get(position)
    if exchange is None or not record.lines.on_branch(position):
        raise NotFound("turn_not_found", "no such turn on the conversation's branch shown")
    if not names_turn(exchange.turns, turn_id):
        raise NotFound("turn_not_found", "no such turn on the conversation's branch shown")
    return position, role


def user_turn(record: ContextRecord, turn_id: str) -> Position:
    position, role = shown_turn(record, turn_id)
    if role != "u":
        raise not_a_user_turn()
    return position


def not_a_user_turn() -> BadRequest:
    return BadRequest("not_a_user_turn", "only a user's turn can be edited")


def stop_result(context: Context, run_id: str | None, stopping: bool) -> dict[str, Any]:
    result = wire.StopResult(context_id=context.id, run_id=run_id, stopping=stopping)
    return result.model_dump(by_alias=True)


def check_decision(request: Mapping[str, Any], value: Any) -> None:
    """A decision must be one of the offered options and match the schema, if any."""
    options = request.get("options")
    if options is not None and value not in options:
        # Read by the person who answered: the options as words, not a Python list.
        raise BadRequest(
            "invalid_decision", f"The answer must be one of: {', '.join(map(str, options))}."
        )
    schema = request.get("decisionSchema")
    if schema is not None:
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(schema).iter_errors(value)
        )
        if error is not None:
            raise BadRequest("invalid_decision", f"The answer does not fit: {error.message[:200]}")


def active_run_id(context: Context) -> str | None:
    """The run in progress, here or on another process."""
    if context.log is not None:
        return context.log.run_id
    active = context.record.active_run
    return active.run_id if active else None
