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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from thinwire.agui.events import Event, Events
from thinwire.agui.messages import ag_ui_messages
from thinwire.agui.request import Answer, Say, read_run_input, read_thread_input
from thinwire.agui.stream import EventSource
from thinwire.boundary import PROTOCOL_HEADERS
from thinwire.foreign_ids import ForeignIds
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
                principal,
                events,
                lambda: THREADS.send(
                    server,
                    agent_name,
                    principal,
                    thread_id,
                    asks.text,
                    message_id=asks.message_id,
                    data=asks.data,
                ),
            )
        context = await THREADS.owned(server, agent_name, principal, thread_id)
        if isinstance(asks, Answer):
            return await stream(
                principal, events, lambda: server.decide(context, asks.interrupt_id, asks.value)
            )
        # Cancelled: the run that waits ends as stopped, as `POST …/stop` ends it.
        context.record.waiting_for(asks.interrupt_id)  # that one, and still waiting
        await server.stop(context)
        ended = [events.start(context.id), events.finish("stopped")]
        return await stream(principal, events, no_frames, ended)

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
            # the thread waits for, if any.
            if pending is not None:
                events.ask(pending)
            first.append(events.finish("interrupted" if pending else "end"))
            return None

        return await stream(principal, events, rest, first)

    async def stop(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        thread_id = request.path_params["thread_id"]
        context = await THREADS.owned(server, agent_name, principal, thread_id)
        return JSONResponse(await server.stop(context), headers=PROTOCOL_HEADERS)

    url = "/ag-ui/{agent}"
    return [
        Route(url, run, methods=["POST"]),
        Route(f"{url}/connect", connect, methods=["POST"]),
        Route(f"{url}/threads/{{thread_id}}/stop", stop, methods=["POST"]),
    ]
