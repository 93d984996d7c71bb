"""The routes an AG-UI client calls, with `new HttpAgent({url: "/ag-ui/{agent}"})`:

    POST {url}                          a run: a new message, or the answer to an interrupt
                                        (`resume`); AG-UI events over SSE
    POST {url}/connect                  AG-UI's `connect`: the thread as the server has it
                                        (MESSAGES_SNAPSHOT), then the run in progress from
                                        its first event, if one runs
    POST {url}/threads/{threadId}/stop  thinwire's stop: `abortRun()` only aborts the fetch

Every route acts for the principal `identify` finds, as thinwire's own routes do, and
every refusal is thinwire's typed JSON error, before any event is sent. An aborted fetch
stops nothing: the run goes on, and `connect` picks it up.

A client's copy of the thread may hold what the server gave it, and send it back: a
user message under one of the thread's own turn ids (from a snapshot) is refused rather
than taken as new input, and a cancel of an interrupt the thread no longer waits on
changes nothing but succeeds, so that the client can drop its pending interrupt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from thinwire.agui.events import Event, Events
from thinwire.agui.messages import ag_ui_messages
from thinwire.agui.request import Answer, Say, read_run_input, read_thread_input
from thinwire.agui.stream import EventSource
from thinwire.boundary import PROTOCOL_HEADERS
from thinwire.contexts import Context
from thinwire.errors import Conflict, NotFound
from thinwire.foreign_ids import ForeignIds
from thinwire.parsing import read_no_fields
from thinwire.records import ContextRecord
from thinwire.routes import caller, counted
from thinwire.runlog import FrameSource
from thinwire.server import AgentServer
from thinwire.sse import EventStream

__all__ = ["ag_ui_routes"]

#: HttpAgent and CopilotKit mint thread ids in the browser; each names a conversation of
#: the caller's.
THREADS = ForeignIds("thinwire.ag-ui", "threadId")


async def no_frames() -> None:
    return None


def refuse_own_turn(record: ContextRecord, message_id: str) -> None:
    """`message_already_sent` for a message under the id of one of the thread's own user
    turns, on any branch: the client has it from the server (a snapshot names the user's
    messages so), so it is no new input. An id the client sent a message under itself
    is a retry of that send, whatever its form."""
    if message_id not in record.sends and record.has_user_turn(message_id):
        raise Conflict(
            "message_already_sent", "that message is in the conversation already; send a new one"
        )


def latest_turn_id(record: ContextRecord) -> str | None:
    """The id of the last turn of the branch shown: after a stop, the reply it ended."""
    exchange = record.latest_exchange
    return str(exchange.turns[-1]["id"]) if exchange is not None and exchange.turns else None


def stop_reason_of(transcript: dict[str, Any] | None) -> str:
    """How the thread's latest reply ended; `end` when it has none (a reply that ended
    showing nothing is no turn of the transcript)."""
    turns = transcript["turns"] if transcript else []
    last = turns[-1] if turns else None
    return str(last["stopReason"]) if last is not None and last["role"] == "assistant" else "end"


def ag_ui_routes(server: AgentServer) -> list[BaseRoute]:
    async def stream(
        principal: str,
        events: Events,
        frames: Callable[[], Awaitable[FrameSource | None]],
        first: list[Event] | None = None,
    ) -> Response:
        """As thinwire's own streams: counted among the principal's open streams from
        before the work starts until the response ends."""
        frames_source, close = await counted(server, principal, frames)
        source = EventSource(events, frames_source, first)
        return EventStream(source, send_timeout=server.send_timeout, on_close=close)

    async def run(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        run_input = await read_run_input(
            request,
            max_body_bytes=server.max_body_bytes,
            max_message_bytes=server.max_message_bytes,
            max_data_bytes=server.max_data_bytes,
        )
        thread_id, asks = run_input.thread_id, run_input.asks
        events = Events(thread_id, run_input.run_id)
        if isinstance(asks, Say):
            return await stream(
                principal, events, lambda: say(agent_name, principal, thread_id, asks)
            )
        context = await THREADS.owned(server, agent_name, principal, thread_id)
        if isinstance(asks, Answer):
            return await stream(
                principal, events, lambda: server.decide(context, asks.interrupt_id, asks.value)
            )
        ended = await cancel(context, asks.interrupt_id, events)
        return await stream(principal, events, no_frames, ended)

    async def say(agent_name: str, principal: str, thread_id: str, asks: Say) -> FrameSource:
        """The frames of the run the message starts (or started, sent again)."""
        context = await THREADS.find(server, agent_name, principal, thread_id)
        if context is not None and asks.message_id is not None:
            refuse_own_turn(context.record, asks.message_id)
        return await THREADS.send(
            server,
            agent_name,
            principal,
            thread_id,
            asks.text,
            message_id=asks.message_id,
            data=asks.data,
        )

    async def cancel(context: Context, interrupt_id: str, events: Events) -> list[Event]:
        """A `cancelled` resume: the run that waits for the interrupt ends as stopped, as
        `POST …/stop` ends it. An interrupt the thread no longer waits on (answered,
        stopped, cancelled before — or never asked: the server cannot tell) is cancelled
        already, and the client may clear it; a thread that waits on another refuses, so
        that the client learns of the question still open."""
        checkpoint = context.record.checkpoint
        if checkpoint is None:  # nothing ends: no run of the server's to name
            return [events.start(context.id), events.finish("stopped")]
        if checkpoint.interrupt_id != interrupt_id:
            raise NotFound("interrupt_not_found", "the thread waits on another interrupt")
        stopped = await server.stop(context)
        reply = latest_turn_id(context.record)
        return [events.start(context.id, stopped["runId"], reply), events.finish("stopped")]

    async def connect(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        thread_id, run_id = await read_thread_input(request, max_body_bytes=server.max_body_bytes)
        events = Events(thread_id, run_id)
        context_id = THREADS.context_id(agent_name, principal, thread_id)
        transcript = await THREADS.transcript(server, agent_name, principal, thread_id)
        running = transcript["activeRunId"] if transcript else None
        pending = transcript["pendingInterrupt"] if transcript else None
        first = [
            events.start(context_id, running),
            {"type": "MESSAGES_SNAPSHOT", "messages": ag_ui_messages(transcript or {"turns": []})},
        ]

        async def rest() -> FrameSource | None:
            if running is not None:  # from its first frame: the snapshot has none of it
                context = await server.context(agent_name, context_id, principal)
                frames = await server.follow(context, 0, run_id=running)
                if frames is not None:
                    return frames
            # Nothing runs: the run of this request ends here, waiting for the decision
            # the thread waits for, if any, else as the thread's latest reply ended.
            if pending is not None:
                events.ask(pending)
            first.append(events.finish("interrupted" if pending else stop_reason_of(transcript)))
            return None

        return await stream(principal, events, rest, first)

    async def stop(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        thread_id = request.path_params["thread_id"]
        context = await THREADS.owned(server, agent_name, principal, thread_id)
        await read_no_fields(request, server.max_body_bytes)
        return JSONResponse(await server.stop(context), headers=PROTOCOL_HEADERS)

    url = "/ag-ui/{agent}"
    return [
        Route(url, run, methods=["POST"]),
        Route(f"{url}/connect", connect, methods=["POST"]),
        Route(f"{url}/threads/{{thread_id}}/stop", stop, methods=["POST"]),
    ]
