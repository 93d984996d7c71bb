"""The HTTP surface of v1: runs over SSE, reattach, stop, read, clear, forget."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from thinwire import wire
from thinwire.contexts import Context
from thinwire.errors import BadRequest
from thinwire.openapi import openapi_document
from thinwire.parsing import check_protocol, read_model, read_run_request
from thinwire.server import AgentServer
from thinwire.sse import EventStream
from thinwire.websocket import agent_socket

__all__ = ["PROTOCOL_HEADERS", "http_routes"]

PROTOCOL_HEADERS = {"Cache-Control": "no-store", wire.PROTOCOL_HEADER: wire.PROTOCOL_VERSION}
#: How long a plain EventSource waits before reconnecting.
RETRY_MS = 1000


def json_response(body: Any, status_code: int = 200) -> Response:
    return JSONResponse(body, status_code=status_code, headers=PROTOCOL_HEADERS)


def json_body(body: bytes) -> Response:
    """A body that is JSON already."""
    return Response(body, media_type="application/json", headers=PROTOCOL_HEADERS)


def after_of(request: Request) -> int:
    """Where a reattach resumes: `Last-Event-ID`, else `?after=`, else the start."""
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    if not raw.isdigit() or len(raw) > 18:
        raise BadRequest("invalid_request", "Last-Event-ID / after must be a frame seq")
    return int(raw)


def http_routes(server: AgentServer) -> list[BaseRoute]:
    async def caller(request: Request) -> tuple[str, str]:
        """The agent the request is for and who asks, once its protocol is checked."""
        check_protocol(request)
        agent_name = server.agent_name(request.path_params["agent"])
        return agent_name, await server.principal(request)

    async def owned_context(request: Request) -> Context:
        agent_name, principal = await caller(request)
        return await server.context(agent_name, request.path_params["context_id"], principal)

    async def start_run(request: Request) -> Response:
        agent_name, principal = await caller(request)
        body = await read_run_request(
            request,
            max_body_bytes=server.max_body_bytes,
            max_message_bytes=server.max_message_bytes,
        )
        log = await server.start(agent_name, principal, body.context_id, body.message.text)
        frames = log.follow(0, server.heartbeat_interval)
        return EventStream(frames, send_timeout=server.send_timeout)

    async def events(request: Request) -> Response:
        context = await owned_context(request)
        frames = await server.follow(context, after_of(request))
        if frames is None:
            # Nothing to send: 204 also tells a browser EventSource to stop reconnecting.
            return Response(status_code=204, headers=PROTOCOL_HEADERS)
        return EventStream(frames, send_timeout=server.send_timeout, retry_ms=RETRY_MS)

    async def stop(request: Request) -> Response:
        return json_response(await server.stop(await owned_context(request)))

    async def decide(request: Request) -> Response:
        context = await owned_context(request)
        body = await read_model(request, wire.DecisionRequest, server.max_body_bytes)
        log = await server.decide(context, body.interrupt_id, body.value)
        return EventStream(
            log.follow(0, server.heartbeat_interval), send_timeout=server.send_timeout
        )

    async def read_context(request: Request) -> Response:
        agent_name, principal = await caller(request)
        context_id = request.path_params["context_id"]
        return json_body(await server.read_transcript(agent_name, context_id, principal))

    async def clear_context(request: Request) -> Response:
        context = await owned_context(request)
        await server.clear(context)
        return json_body(server.transcript(context))

    async def forget_context(request: Request) -> Response:
        await server.forget(await owned_context(request))
        return Response(status_code=204, headers=PROTOCOL_HEADERS)

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(list(server.agents), operator_api=server.operator_api))

    context = "/agents/{agent}/contexts/{context_id}"
    return [
        Route("/agents/{agent}/runs", start_run, methods=["POST"]),
        WebSocketRoute("/agents/{agent}/ws", agent_socket(server)),
        Route(context, read_context, methods=["GET"]),
        Route(context, forget_context, methods=["DELETE"]),
        Route(f"{context}/events", events, methods=["GET"]),
        Route(f"{context}/stop", stop, methods=["POST"]),
        Route(f"{context}/decisions", decide, methods=["POST"]),
        Route(f"{context}/clear", clear_context, methods=["POST"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
