"""The app factory: a Starlette app that serves agents over the thinwire protocol.

    app = create_app({"echo": Echo}, identify=my_identify)

Run it alone (`thinwire serve module:app`) or mount it inside another Starlette or
FastAPI app with `thinwire.mount`, which keeps its lifespan. A misconfiguration is
refused when the app is made (a wrong argument) or when it starts (a store that does not
answer, an agent that cannot be made), with a sentence saying what to change. Every
error a client meets leaves typed (see `boundary.py`).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.types import Message, Receive, Scope, Send

from thinwire import wire
from thinwire.a2a import A2A, a2a_routes
from thinwire.admin import operator_routes
from thinwire.agui import ag_ui_routes
from thinwire.aisdk import ai_sdk_routes
from thinwire.boundary import EXCEPTION_HANDLERS, error_response
from thinwire.browser import COMMON_HEADERS, BrowserGuard
from thinwire.contexts import DEFAULT_CACHE_BYTES, AgentFactory
from thinwire.coordination import Coordinator
from thinwire.direct import SERVER_SEND
from thinwire.errors import BadRequest, Forbidden, Misconfigured, ThinwireError
from thinwire.identity import Identify
from thinwire.limits import RateLimiter
from thinwire.routes import http_routes
from thinwire.server import AgentServer
from thinwire.settings import (
    check_agents,
    check_flag,
    check_hosts,
    check_identify,
    check_number,
    check_operator_token,
    check_origins,
    check_routes,
)
from thinwire.stores import SQLiteStore, Store
from thinwire.web import page_route

__all__ = ["create_app", "default_data_dir", "one_line_startup_failure"]

#: A request body's room for all but the message and its data: ids, keys, quotes.
BODY_ENVELOPE_BYTES = 4096


def default_data_dir() -> Path:
    """Where the default SQLite store lives: $THINWIRE_DATA_DIR, else ./.thinwire."""
    return Path(os.environ.get("THINWIRE_DATA_DIR") or ".thinwire")


def create_app(
    agents: Mapping[str, AgentFactory],
    *,
    identify: Identify,
    store: Store | None = None,
    coordinator: Coordinator | None = None,
    max_contexts: int = 1000,
    max_context_bytes: int = DEFAULT_CACHE_BYTES,
    lease_ttl: float = 10.0,
    operator_token: str | Sequence[str] | None = None,
    max_message_bytes: int = 32 * 1024,
    max_body_bytes: int | None = None,
    max_data_bytes: int = 16 * 1024,
    heartbeat_interval: float | None = 15.0,
    send_timeout: float = 30.0,
    event_ttl: float = 24 * 3600.0,
    allowed_origins: Sequence[str] = (),
    allowed_hosts: Sequence[str] | None = None,
    cors: bool = False,
    runs_per_second: float = 2.0,
    run_burst: int = 30,
    max_runs: int = 16,
    max_streams: int = 32,
    web_dir: Path | str | None = None,
    routes: Sequence[BaseRoute] = (),
    a2a: A2A | None = None,
    debug: bool = False,
) -> Starlette:
    """A Starlette app serving `agents` (name -> the Agent class, or any function of no
    arguments that makes a fresh agent per conversation).

    `identify(connection)` names the principal a request acts for (see
    `thinwire.identity`; `thinwire.anonymous` opts out of ownership explicitly). `store`
    defaults to SQLite under `default_data_dir()`; `coordinator` to the store's own (see
    `thinwire.coordination`): with Redis, a replica that dies mid-run frees its contexts
    after `lease_ttl` seconds. Up to `max_contexts` conversations, holding at most
    `max_context_bytes` between them, stay live in memory (the least recently used go
    first; the store has them). `operator_token` enables the operator API at `/admin`
    (at least 16 characters, no whitespace around them; None or "" for none; a list
    while a new token replaces an old one).
    `max_message_bytes` bounds a user message (UTF-8), `max_data_bytes` the data a page
    sends with it, `max_body_bytes` the request body (default: room for both with JSON
    escaping). `heartbeat_interval` keeps idle streams alive through proxies (streams name
    it, so a client can tell a quiet stream from a dead one); a client
    that does not take a frame within `send_timeout` seconds is disconnected (it can
    reattach); the frames of past runs are kept `event_ttl` seconds.

    `allowed_origins` lists other sites whose pages may act with this site's credentials
    (state changes and WebSockets); with `cors`, the same sites may also read the
    responses, with credentials, preflights answered (a page on another origin, such as
    Vite's dev server). `allowed_hosts` are the host names the server answers to besides
    those no other site can point at it (addresses, `localhost`): checked by default
    where `identify` is `anonymous`, which DNS rebinding could otherwise reach from any
    page (`["*"]` turns it off); other apps check it when given. Each principal may
    start `run_burst` runs at once and `runs_per_second` more each second (429 beyond;
    0 turns the limit off), have `max_runs` runs in progress on this process (a run
    waiting for a decision is not in progress; 0 turns it off) and hold `max_streams`
    streams open (SSE responses, WebSockets and the runs they follow; 0 turns it off).
    `web_dir` is a built page to serve at `/` (see `thinwire.web`); `routes` are the
    app's own, served alongside.

    Every agent is also an A2A agent at `/a2a/{name}` (see `thinwire.a2a`); `a2a` says
    what its card tells A2A clients, such as the credential `identify` reads.
    """
    check_agents(agents)
    check_identify(identify)
    if store is not None and not isinstance(store, Store):
        raise TypeError(f"store must be a thinwire Store, not {type(store).__name__}")
    if coordinator is not None and not isinstance(coordinator, Coordinator):
        raise TypeError(
            f"coordinator must be a thinwire Coordinator, not {type(coordinator).__name__}"
        )
    check_flag("cors", cors)
    check_flag("debug", debug)
    origins = check_origins(allowed_origins, cors=cors)
    operator_tokens = check_operator_token(operator_token)
    # Each refused now: taken, a wrong one would be a 429, 413 or 500 on every request.
    check_number("max_contexts", max_contexts, least=1)
    check_number("max_context_bytes", max_context_bytes, least=1)
    check_number("max_message_bytes", max_message_bytes, least=1)
    check_number("max_data_bytes", max_data_bytes, least=2, why="2 holds {}: no data")
    # JSON may spell each byte of a string in six (\u0000): the default has room for that.
    least_body = max_message_bytes + max_data_bytes + BODY_ENVELOPE_BYTES
    check_number(
        "max_body_bytes",
        max_body_bytes,
        least=least_body,
        optional=True,
        why=f"max_message_bytes + max_data_bytes + {BODY_ENVELOPE_BYTES}: room for both",
    )
    if max_body_bytes is None:
        max_body_bytes = 6 * (max_message_bytes + max_data_bytes) + BODY_ENVELOPE_BYTES
    check_number("lease_ttl", lease_ttl, above=0, whole=False)
    check_number("heartbeat_interval", heartbeat_interval, above=0, whole=False, optional=True)
    check_number("send_timeout", send_timeout, above=0, whole=False)
    check_number("event_ttl", event_ttl, above=0, whole=False)
    check_number("runs_per_second", runs_per_second, least=0, whole=False, why="0: no limit")
    check_number("run_burst", run_burst, least=1)
    check_number("max_runs", max_runs, least=0, why="0: no limit")
    check_number("max_streams", max_streams, least=0, why="0: no limit")
    check_routes(routes)
    if web_dir is not None and not isinstance(web_dir, str | os.PathLike):
        raise TypeError(
            f"web_dir must be a directory's path (a str or a Path) or None, "
            f"not {type(web_dir).__name__}"
        )
    server = AgentServer(
        agents,
        identify=identify,
        store=store or SQLiteStore.in_directory(default_data_dir()),
        coordinator=coordinator,
        max_contexts=max_contexts,
        max_context_bytes=max_context_bytes,
        lease_ttl=lease_ttl,
        max_message_bytes=max_message_bytes,
        max_body_bytes=max_body_bytes,
        max_data_bytes=max_data_bytes,
        heartbeat_interval=heartbeat_interval,
        send_timeout=send_timeout,
        event_ttl=event_ttl,
        allowed_origins=origins,
        limiter=RateLimiter(runs_per_second, run_burst) if runs_per_second > 0 else None,
        max_runs=max_runs,
        max_streams=max_streams,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await server.startup()
        yield
        await server.shutdown()

    all_routes = [*http_routes(server), *routes]
    # Other protocols' faces of the same agents and memory (docs/interop.md).
    all_routes += a2a_routes(server, a2a or A2A())
    all_routes += ai_sdk_routes(server)
    all_routes += ag_ui_routes(server)
    if operator_tokens:
        server.operator_tokens = operator_tokens
        all_routes.append(Mount("/admin", routes=operator_routes(server, operator_tokens)))
    if web_dir is not None:
        all_routes.append(page_route(Path(web_dir)))
    hosts = check_hosts(allowed_hosts, origins, identify)
    middleware = [Middleware(BrowserGuard, allowed_origins=origins, hosts=hosts)]
    if cors:
        middleware.insert(0, cors_middleware(origins))
    app = ThinwireApp(
        debug=debug,
        routes=all_routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.thinwire = server
    return app


class ThinwireApp(Starlette):
    """The app `create_app` makes. It keeps the send the server hands it where streams
    find it (`direct.SERVER_SEND`), to write their frames past its own middleware, as
    long as that middleware is all its own: one added later (`add_middleware`) sees
    every message."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._own_middleware = list(self.user_middleware)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await super().__call__(scope, receive, one_line_startup_failure(send))
            return
        if self.user_middleware != self._own_middleware:
            await super().__call__(scope, receive, send)
            return
        scope[SERVER_SEND] = send
        try:
            await super().__call__(scope, receive, send)
        finally:
            # The send is a method of the server's object for this request, which holds
            # the scope: left here, the two would keep each other, and the connection's
            # objects with them, until a full collection found them.
            scope.pop(SERVER_SEND, None)


def one_line_startup_failure(send: Send) -> Send:
    """The lifespan's `send`, where a startup that failed for a misconfiguration (a
    `Misconfigured`: a store that does not answer, one another process owns, an agent
    that cannot be made) is reported as its one sentence, which says what to change:
    Starlette sends the whole traceback, which the server logs. Any other failure keeps
    its traceback."""

    async def sending(message: Message) -> None:
        if message["type"] == "lifespan.startup.failed":
            failure = sys.exc_info()[1]  # Starlette sends this as it handles the failure
            if isinstance(failure, Misconfigured):
                sentence = " ".join(str(failure).split())
                message = {**message, "message": f"thinwire cannot start: {sentence}"}
        await send(message)

    return sending


class Cors(CORSMiddleware):
    """Starlette's CORS, with preflights answered as thinwire answers any request: the
    protocol named, and a refusal as a typed error rather than plain text."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code == 200:
            response.headers[wire.PROTOCOL_HEADER] = wire.PROTOCOL_VERSION
            response.raw_headers += COMMON_HEADERS  # outside BrowserGuard, which adds them
            return response
        if not self.is_allowed_origin(origin=request_headers["origin"]):
            error: ThinwireError = Forbidden(
                "origin_not_allowed", "this origin is not in the server's allowed_origins"
            )
        else:
            refused = bytes(response.body).decode().removeprefix("Disallowed CORS ")
            error = BadRequest(
                "invalid_request", f"this server does not allow the preflight's {refused}"
            )
        refusal = error_response(error, {"Vary": "Origin"})
        refusal.raw_headers += COMMON_HEADERS
        return refusal


def cors_middleware(origins: Sequence[str]) -> Middleware:
    """Pages of `origins` may call with credentials (cookies, or an Authorization header)
    and read the answers; preflights are answered for a day."""
    return Middleware(
        Cors,
        allow_origins=list(origins),
        allow_credentials=True,
        allow_methods=["GET", "POST", "PATCH", "DELETE"],
        allow_headers=[
            "authorization",
            "content-type",
            "last-event-id",
            wire.PROTOCOL_HEADER.lower(),
            "a2a-version",  # what an A2A client sends with every request
        ],
        expose_headers=[wire.PROTOCOL_HEADER, wire.HEARTBEAT_HEADER, "Retry-After"],
        max_age=86400,
    )
