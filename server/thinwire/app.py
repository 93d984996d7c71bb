"""The app factory: a Starlette app that serves agents over the thinwire protocol.

    app = create_app({"echo": Echo}, identify=my_identify)

Run it alone (`thinwire serve module:app`) or mount it inside another Starlette or
FastAPI app. Every error leaves as `{"error": {"code", "message"}}` with a 4xx status.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from thinwire import wire
from thinwire.admin import operator_routes
from thinwire.contexts import AgentFactory, Context, ContextRegistry
from thinwire.errors import MethodNotAllowed, NotFound, ThinwireError
from thinwire.identity import Identify, principal_of
from thinwire.ids import validate_context_id
from thinwire.parsing import check_protocol, read_run_request
from thinwire.runs import begin_run, execute
from thinwire.sse import sse_response
from thinwire.stores import SQLiteStore, Store
from thinwire.web import web_routes

__all__ = ["AgentServer", "create_app", "default_data_dir"]

PROTOCOL_HEADERS = {"Cache-Control": "no-store", wire.PROTOCOL_HEADER: wire.PROTOCOL_VERSION}


def default_data_dir() -> Path:
    """Where the default SQLite store lives: $THINWIRE_DATA_DIR, else ./.thinwire."""
    return Path(os.environ.get("THINWIRE_DATA_DIR") or ".thinwire")


def json_response(body: Any, status_code: int = 200) -> Response:
    return JSONResponse(body, status_code=status_code, headers=PROTOCOL_HEADERS)


class AgentServer:
    """The state behind one app: its agents, its contexts and the runs in flight."""

    def __init__(
        self,
        agents: Mapping[str, AgentFactory],
        *,
        identify: Identify,
        store: Store,
        max_contexts: int,
        max_message_bytes: int,
        max_body_bytes: int,
        heartbeat_interval: float | None,
    ) -> None:
        self.agents = dict(agents)
        self.identify = identify
        self.store = store
        self.contexts = ContextRegistry(store, self.agents, max_contexts=max_contexts)
        self.max_message_bytes = max_message_bytes
        self.max_body_bytes = max_body_bytes
        self.heartbeat_interval = heartbeat_interval
        self._tasks: set[asyncio.Task[None]] = set()

    def _agent_name(self, request: Request) -> str:
        name: str = request.path_params["agent"]
        if name not in self.agents:
            raise NotFound("agent_not_found", f"no agent named {name[:64]!r}")
        return name

    async def _context(self, request: Request) -> Context:
        """The context named in the path, if the caller's principal owns it."""
        check_protocol(request)
        agent_name = self._agent_name(request)
        principal = await principal_of(request, self.identify)
        context_id = validate_context_id(request.path_params["context_id"])
        return await self.contexts.get(agent_name, context_id, principal)

    async def start_run(self, request: Request) -> Response:
        check_protocol(request)
        agent_name = self._agent_name(request)
        principal = await principal_of(request, self.identify)
        body = await read_run_request(
            request,
            max_body_bytes=self.max_body_bytes,
            max_message_bytes=self.max_message_bytes,
        )
        if body.context_id is None:
            context = await self.contexts.create(agent_name, principal)
        else:
            context_id = validate_context_id(body.context_id)
            context = await self.contexts.get(agent_name, context_id, principal)
        log = await begin_run(self.contexts, context, body.message.text)
        task = asyncio.create_task(execute(self.contexts, context, log, body.message.text))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return sse_response(log, heartbeat=self.heartbeat_interval)

    async def read_context(self, request: Request) -> Response:
        context = await self._context(request)
        return json_response(transcript(context))

    async def clear_context(self, request: Request) -> Response:
        """Drop the conversation history; keep AgentState, the audit trail and the id."""
        context = await self._context(request)
        with self.contexts.hold(context, "clear"):
            record = context.record
            record.history = [m for m in record.history if m["role"] == "system"]
            record.transcript = []
            await self.contexts.save(context)
        return json_response(transcript(context))

    async def forget_context(self, request: Request) -> Response:
        """Remove every trace of the conversation from the store."""
        context = await self._context(request)
        await self.contexts.forget(context)
        return Response(status_code=204, headers=PROTOCOL_HEADERS)

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def shutdown(self) -> None:
        """Bring runs in flight to a recorded end (`interrupted`), then close the store."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.store.close()

    def routes(self) -> list[BaseRoute]:
        context = "/agents/{agent}/contexts/{context_id}"
        return [
            Route("/agents/{agent}/runs", self.start_run, methods=["POST"]),
            Route(context, self.read_context, methods=["GET"]),
            Route(context, self.forget_context, methods=["DELETE"]),
            Route(f"{context}/clear", self.clear_context, methods=["POST"]),
            Route("/healthz", self.health, methods=["GET"]),
        ]


def transcript(context: Context) -> dict[str, Any]:
    """The public projection of a context, built field by field."""
    turns = [wire.TranscriptTurn.model_validate(turn) for turn in context.transcript]
    body = wire.Transcript(context_id=context.id, agent=context.agent_name, turns=turns)
    return body.model_dump(by_alias=True)


def error_response(error: ThinwireError, headers: Mapping[str, str] | None = None) -> Response:
    body = wire.ErrorBody(error=wire.ErrorDetail(code=error.code, message=error.message))
    return JSONResponse(
        body.model_dump(by_alias=True),
        status_code=error.status,
        headers={**PROTOCOL_HEADERS, **(headers or {})},
    )


async def on_thinwire_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ThinwireError)
    challenge = {"WWW-Authenticate": "Bearer"} if exc.code == "unauthorized" else None
    return error_response(exc, challenge)


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
    identify: Identify,
    store: Store | None = None,
    max_contexts: int = 1000,
    operator_token: str | None = None,
    max_message_bytes: int = 32 * 1024,
    max_body_bytes: int | None = None,
    heartbeat_interval: float | None = 15.0,
    web_dir: Path | None = None,
    routes: Sequence[BaseRoute] = (),
    debug: bool = False,
) -> Starlette:
    """A Starlette app serving `agents` (name -> factory of a fresh agent per context).

    `identify(connection)` names the principal a request acts for (see
    `thinwire.identity`; `thinwire.anonymous` opts out of ownership explicitly). `store`
    defaults to SQLite under `default_data_dir()`. `operator_token` enables the operator
    API at `/admin`. `max_message_bytes` bounds a user message (UTF-8), `max_body_bytes`
    the request body (default: room for a maximal message with JSON escaping). `web_dir`
    is a Vite build to serve as the page at `/`; `routes` are the app's own, served
    alongside.
    """
    server = AgentServer(
        agents,
        identify=identify,
        store=store or SQLiteStore.in_directory(default_data_dir()),
        max_contexts=max_contexts,
        max_message_bytes=max_message_bytes,
        max_body_bytes=max_body_bytes or 6 * max_message_bytes + 4096,
        heartbeat_interval=heartbeat_interval,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await server.shutdown()

    all_routes = [*server.routes(), *routes]
    if operator_token:
        all_routes.append(Mount("/admin", routes=operator_routes(server.contexts, operator_token)))
    if web_dir is not None:
        all_routes += web_routes(web_dir)
    app = Starlette(
        debug=debug,
        routes=all_routes,
        lifespan=lifespan,
        exception_handlers={ThinwireError: on_thinwire_error, HTTPException: on_http_error},
    )
    app.state.thinwire = server
    return app
