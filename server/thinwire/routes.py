"""The HTTP surface of v1: runs over SSE, reattach, stop, read, clear, forget; a
principal's conversations, their titles and branches."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from thinwire import wire
from thinwire.admin import is_operator
from thinwire.boundary import PROTOCOL_HEADERS
from thinwire.branches import reaching_back
from thinwire.contexts import Context
from thinwire.errors import BadRequest
from thinwire.openapi import openapi_document
from thinwire.parsing import (
    ascii_number,
    check_data,
    check_message,
    check_protocol,
    page_of,
    query_value,
    read_model,
    read_no_fields,
    read_run_request,
)
from thinwire.readiness import in_time
from thinwire.runlog import FrameSource
from thinwire.server import AgentServer
from thinwire.sse import EventStream
from thinwire.stores.listing import page_size
from thinwire.websocket import agent_socket

__all__ = ["http_routes"]

#: How long a plain EventSource waits before reconnecting.
RETRY_MS = 1000


def json_response(body: Any, status_code: int = 200) -> Response:
    return JSONResponse(body, status_code=status_code, headers=PROTOCOL_HEADERS)


def json_body(body: bytes) -> Response:
    """A body that is JSON already."""
    return Response(body, media_type="application/json", headers=PROTOCOL_HEADERS)


def after_of(request: Request) -> int:
    """Where a reattach resumes: `Last-Event-ID`, else `?after=`, else the start."""
    raw = request.headers.get("last-event-id") or query_value(request, "after") or "0"
    after = ascii_number(raw, wire.MAX_SEQ)
    if after is None:
        raise BadRequest("invalid_request", "Last-Event-ID / after must be a frame seq")
    return after


#: What a face's work hands its response: thinwire's frames, or a face's own events.
T = TypeVar("T")


async def caller(server: AgentServer, request: Request) -> tuple[str, str]:
    """The agent a request of any HTTP face is for and who asks, once its protocol is
    checked."""
    check_protocol(request)
    agent_name = server.agent_name(request.path_params["agent"])
    return agent_name, await server.principal(request)


async def counted(
    server: AgentServer, principal: str, frames: Callable[[], Awaitable[T | None]]
) -> tuple[T | None, Callable[[], None]]:
    """`frames()`, counted among the principal's open streams from before the work starts
    (`too_many_streams` beyond the cap): the source, and the close its response calls when
    it ends (or the caller, when there is no response to stream) — called already if the
    work fails."""
    close = server.streams.open(principal)
    try:
        source = await frames()
    except BaseException:
        close()
        raise
    return source, close


def http_routes(server: AgentServer) -> list[BaseRoute]:
    # What a client needs to tell a quiet stream from a dead one (a proxy may keep the
    # connection of a server that died open): how often the server breaks a silence.
    interval = server.heartbeat_interval
    heartbeat_headers = {wire.HEARTBEAT_HEADER: "0" if interval is None else f"{interval:g}"}

    async def owned_context(request: Request) -> Context:
        agent_name, principal = await caller(server, request)
        return await server.context(agent_name, request.path_params["context_id"], principal)

    async def stream(
        principal: str,
        frames: Callable[[], Awaitable[FrameSource | None]],
        retry_ms: int | None = None,
    ) -> Response:
        """The frames as SSE, counted among the principal's open streams from before the
        work starts until the response ends (`too_many_streams` beyond the cap)."""
        source, close = await counted(server, principal, frames)
        if source is None:
            close()
            # Nothing to send: 204 also tells a browser EventSource to stop reconnecting.
            return Response(status_code=204, headers=PROTOCOL_HEADERS)
        return EventStream(
            source,
            send_timeout=server.send_timeout,
            retry_ms=retry_ms,
            on_close=close,
            headers=heartbeat_headers,
        )

    async def start_run(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        body = await read_run_request(
            request,
            max_body_bytes=server.max_body_bytes,
            max_message_bytes=server.max_message_bytes,
            max_data_bytes=server.max_data_bytes,
        )
        return await stream(
            principal,
            lambda: server.send(
                agent_name,
                principal,
                body.context_id,
                body.message.text,
                data=body.data,
                message_id=body.message_id,
                after_turn_id=body.after_turn_id,
            ),
        )

    async def events(request: Request) -> Response:
        context = await owned_context(request)
        after = after_of(request)
        return await stream(context.record.owner, lambda: server.follow(context, after), RETRY_MS)

    async def stop(request: Request) -> Response:
        context = await owned_context(request)
        await read_no_fields(request, server.max_body_bytes)
        return json_response(await server.stop(context))

    async def decide(request: Request) -> Response:
        context = await owned_context(request)
        body = await read_model(request, wire.DecisionRequest, server.max_body_bytes)
        return await stream(
            context.record.owner, lambda: server.decide(context, body.interrupt_id, body.value)
        )

    async def read_context(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        context_id = request.path_params["context_id"]
        page = page_of(request)
        return json_body(await server.read_transcript(agent_name, context_id, principal, page))

    async def clear_context(request: Request) -> Response:
        context = await owned_context(request)
        await read_no_fields(request, server.max_body_bytes)
        await server.clear(context)
        return json_body(await server.transcript(context))

    async def list_contexts(request: Request) -> Response:
        agent_name, principal = await caller(server, request)
        limit = page_size(query_value(request, "limit"))
        cursor = query_value(request, "cursor") or None
        return json_response(await server.conversations(agent_name, principal, limit, cursor))

    async def rename_context(request: Request) -> Response:
        context = await owned_context(request)
        body = await read_model(request, wire.RenameRequest, server.max_body_bytes)
        await server.rename(context, body.title)
        return json_response(server.summary(context))

    async def regenerate(request: Request) -> Response:
        context = await owned_context(request)
        body = await read_model(request, wire.RegenerateRequest, server.max_body_bytes)
        return await stream(
            context.record.owner,
            lambda: server.regenerate(context, turn_id=body.turn_id, message_id=body.message_id),
        )

    async def edit(request: Request) -> Response:
        context = await owned_context(request)
        body = await read_model(request, wire.EditRequest, server.max_body_bytes)
        check_message(body.message.text, server.max_message_bytes)
        check_data(body.data, server.max_data_bytes)
        return await stream(
            context.record.owner,
            lambda: server.edit(
                context,
                body.turn_id,
                body.message.text,
                data=body.data,
                message_id=body.message_id,
            ),
        )

    async def switch_branch(request: Request) -> Response:
        context = await owned_context(request)
        body = await read_model(request, wire.BranchRequest, server.max_body_bytes)
        page = page_of(request)
        fork = await server.switch_branch(context, body.turn_id, body.index)
        depth = context.record.lines.depth
        page = reaching_back(page, fork, depth, wire.MAX_TRANSCRIPT_PAGE)
        return json_body(await server.transcript(context, page))

    async def forget_context(request: Request) -> Response:
        await server.forget(await owned_context(request))
        return Response(status_code=204, headers=PROTOCOL_HEADERS)

    async def ticket(request: Request) -> Response:
        """A ticket for one WebSocket handshake, for clients that authenticate with
        headers (which a browser cannot put on a WebSocket)."""
        agent_name, principal = await caller(server, request)
        assert server.tickets is not None  # made at startup
        ticket = await server.tickets.issue(principal, agent_name)
        return json_response(ticket.model_dump(by_alias=True))

    async def health(request: Request) -> Response:
        """Liveness: the process answers."""
        return json_response({"ok": True})

    async def ready(request: Request) -> Response:
        """Readiness, for a load balancer: the store answers too, in time (else 503)."""
        await in_time(server.check_store())
        return json_response({"ok": True})

    async def openapi(request: Request) -> Response:
        # The operator routes are described to the operator only.
        operator = is_operator(request, server.operator_tokens)
        document = openapi_document(list(server.agents), operator_api=operator)
        if root := request.scope.get("root_path", ""):  # mounted: the paths are under it
            document["servers"] = [{"url": root}]
        return json_response(document)

    context = "/agents/{agent}/contexts/{context_id}"
    return [
        Route("/agents/{agent}/runs", start_run, methods=["POST"]),
        Route("/agents/{agent}/tickets", ticket, methods=["POST"]),
        WebSocketRoute("/agents/{agent}/ws", agent_socket(server)),
        Route("/agents/{agent}/contexts", list_contexts, methods=["GET"]),
        Route(context, read_context, methods=["GET"]),
        Route(context, rename_context, methods=["PATCH"]),
        Route(context, forget_context, methods=["DELETE"]),
        Route(f"{context}/events", events, methods=["GET"]),
        Route(f"{context}/stop", stop, methods=["POST"]),
        Route(f"{context}/decisions", decide, methods=["POST"]),
        Route(f"{context}/clear", clear_context, methods=["POST"]),
        Route(f"{context}/regenerate", regenerate, methods=["POST"]),
        Route(f"{context}/edits", edit, methods=["POST"]),
        Route(f"{context}/branch", switch_branch, methods=["POST"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/readyz", ready, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
