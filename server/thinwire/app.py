"""The app factory: a Starlette app that serves agents over the thinwire protocol.

    app = create_app({"echo": Echo})

Run it alone (`thinwire serve module:app`) or mount it inside another Starlette or
FastAPI app. Every error leaves as `{"error": {"code", "message"}}` with a 4xx status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from thinwire import wire
from thinwire.agent import Agent
from thinwire.contexts import Context, ContextRegistry
from thinwire.errors import Conflict, MethodNotAllowed, NotFound, ThinwireError
from thinwire.ids import new_run_id, validate_context_id
from thinwire.parsing import check_protocol, read_run_request
from thinwire.runs import RunLog, execute
from thinwire.sse import sse_response
from thinwire.web import web_routes

__all__ = ["AgentServer", "create_app"]

logger = logging.getLogger("thinwire")

AgentFactory = Callable[[], Agent]


class AgentServer:
    """The state behind one app: its agents, its contexts and the runs in flight."""

    def __init__(
        self,
        agents: Mapping[str, AgentFactory],
        *,
        max_message_bytes: int,
        max_body_bytes: int,
        heartbeat_interval: float | None,
    ) -> None:
        self.agents = dict(agents)
        self.contexts = ContextRegistry()
        self.max_message_bytes = max_message_bytes
        self.max_body_bytes = max_body_bytes
        self.heartbeat_interval = heartbeat_interval
        self._tasks: set[asyncio.Task[None]] = set()

    def _agent_name(self, request: Request) -> str:
        name: str = request.path_params["agent"]
        if name not in self.agents:
            raise NotFound("agent_not_found", f"no agent named {name[:64]!r}")
        return name

    def _context(self, agent_name: str, context_id: str) -> Context:
        return self.contexts.get(agent_name, validate_context_id(context_id))

    async def start_run(self, request: Request) -> Response:
        check_protocol(request)
        agent_name = self._agent_name(request)
        body = await read_run_request(
            request,
            max_body_bytes=self.max_body_bytes,
            max_message_bytes=self.max_message_bytes,
        )
        if body.context_id is None:
            context = self.contexts.create(agent_name, self.agents[agent_name]())
        else:
            context = self._context(agent_name, body.context_id)
        if context.run is not None:
            raise Conflict("context_busy", f"a run is already in progress in {context.id}")
        log = context.run = RunLog(context, new_run_id())
        task = asyncio.create_task(execute(context, log, body.message.text))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return sse_response(log, heartbeat=self.heartbeat_interval)

    async def read_context(self, request: Request) -> Response:
        check_protocol(request)
        agent_name = self._agent_name(request)
        context = self._context(agent_name, request.path_params["context_id"])
        transcript = wire.Transcript(
            context_id=context.id, agent=agent_name, turns=list(context.transcript)
        )
        return Response(
            transcript.model_dump_json(by_alias=True),
            media_type="application/json",
            headers={"Cache-Control": "no-store", wire.PROTOCOL_HEADER: wire.PROTOCOL_VERSION},
        )

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def shutdown(self) -> None:
        """Cancel runs still in flight so each ends with a recorded `done`."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/agents/{agent}/runs", self.start_run, methods=["POST"]),
            Route("/agents/{agent}/contexts/{context_id}", self.read_context, methods=["GET"]),
            Route("/healthz", self.health, methods=["GET"]),
        ]


def error_response(error: ThinwireError) -> JSONResponse:
    body = wire.ErrorBody(error=wire.ErrorDetail(code=error.code, message=error.message))
    return JSONResponse(body.model_dump(by_alias=True), status_code=error.status)


async def on_thinwire_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ThinwireError)
    return error_response(exc)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 in the same typed shape as ours."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return error_response(MethodNotAllowed("method_not_allowed", "method not allowed"))
    if exc.status_code == 404:
        return error_response(NotFound("not_found", f"no route for {request.url.path[:200]}"))
    error = ThinwireError("http_error", str(exc.detail))
    error.status = exc.status_code
    return error_response(error)


def create_app(
    agents: Mapping[str, AgentFactory],
    *,
    max_message_bytes: int = 32 * 1024,
    max_body_bytes: int | None = None,
    heartbeat_interval: float | None = 15.0,
    web_dir: Path | None = None,
    debug: bool = False,
) -> Starlette:
    """A Starlette app serving `agents` (name -> factory of a fresh agent per context).

    `max_message_bytes` bounds a user message (UTF-8), `max_body_bytes` the request body
    (default: room for a maximal message with JSON escaping). `web_dir` is a Vite build
    to serve as the page at `/`.
    """
    server = AgentServer(
        agents,
        max_message_bytes=max_message_bytes,
        max_body_bytes=max_body_bytes or 6 * max_message_bytes + 4096,
        heartbeat_interval=heartbeat_interval,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await server.shutdown()

    routes = server.routes() + (web_routes(web_dir) if web_dir is not None else [])
    app = Starlette(
        debug=debug,
        routes=routes,
        lifespan=lifespan,
        exception_handlers={ThinwireError: on_thinwire_error, HTTPException: on_http_error},
    )
    app.state.thinwire = server
    return app
