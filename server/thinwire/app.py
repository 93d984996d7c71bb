"""The app factory: a Starlette app that serves agents over the thinwire protocol.

    app = create_app({"echo": Echo}, identify=my_identify)

Run it alone (`thinwire serve module:app`) or mount it inside another Starlette or
FastAPI app. Every error leaves typed (see `boundary.py`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute, Mount

from thinwire.admin import operator_routes
from thinwire.boundary import EXCEPTION_HANDLERS
from thinwire.browser import BrowserGuard
from thinwire.contexts import AgentFactory
from thinwire.coordination import Coordinator
from thinwire.identity import Identify
from thinwire.limits import RateLimiter
from thinwire.routes import http_routes
from thinwire.server import AgentServer
from thinwire.stores import SQLiteStore, Store
from thinwire.web import web_routes

__all__ = ["create_app", "default_data_dir"]


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
    lease_ttl: float = 10.0,
    operator_token: str | None = None,
    max_message_bytes: int = 32 * 1024,
    max_body_bytes: int | None = None,
    heartbeat_interval: float | None = 15.0,
    send_timeout: float = 30.0,
    event_ttl: float = 24 * 3600.0,
    allowed_origins: Sequence[str] = (),
    runs_per_second: float = 2.0,
    run_burst: int = 30,
    max_streams: int = 32,
    web_dir: Path | None = None,
    routes: Sequence[BaseRoute] = (),
    debug: bool = False,
) -> Starlette:
    """A Starlette app serving `agents` (name -> factory of a fresh agent per context).

    `identify(connection)` names the principal a request acts for (see
    `thinwire.identity`; `thinwire.anonymous` opts out of ownership explicitly). `store`
    defaults to SQLite under `default_data_dir()`; `coordinator` to the store's own (see
    `thinwire.coordination`): with Redis, a replica that dies mid-run frees its contexts
    after `lease_ttl` seconds. `operator_token`
    enables the operator API at `/admin`. `max_message_bytes` bounds a user message
    (UTF-8), `max_body_bytes` the request body (default: room for a maximal message with
    JSON escaping).
    `heartbeat_interval` keeps idle streams alive through proxies; a client that does not
    take a frame within `send_timeout` seconds is disconnected (it can reattach); the
    frames of past runs are kept `event_ttl` seconds. `allowed_origins` lists other sites
    whose pages may open WebSockets with this site's cookies. Each principal may start
    `run_burst` runs at once and `runs_per_second` more each second (429 beyond; 0 turns
    the limit off); each may hold `max_streams` streams open at once (SSE responses,
    WebSockets and the runs they follow; 429 beyond; 0 turns it off). `web_dir` is a Vite
    build
    to serve as the page at `/`; `routes` are the app's own, served alongside.
    """
    server = AgentServer(
        agents,
        identify=identify,
        store=store or SQLiteStore.in_directory(default_data_dir()),
        coordinator=coordinator,
        max_contexts=max_contexts,
        lease_ttl=lease_ttl,
        max_message_bytes=max_message_bytes,
        max_body_bytes=max_body_bytes or 6 * max_message_bytes + 4096,
        heartbeat_interval=heartbeat_interval,
        send_timeout=send_timeout,
        event_ttl=event_ttl,
        allowed_origins=allowed_origins,
        limiter=RateLimiter(runs_per_second, run_burst) if runs_per_second > 0 else None,
        max_streams=max_streams,
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await server.startup()
        yield
        await server.shutdown()

    all_routes = [*http_routes(server), *routes]
    if operator_token:
        server.operator_token = operator_token
        all_routes.append(Mount("/admin", routes=operator_routes(server.contexts, operator_token)))
    if web_dir is not None:
        all_routes += web_routes(web_dir)
    app = Starlette(
        debug=debug,
        routes=all_routes,
        middleware=[Middleware(BrowserGuard, allowed_origins=allowed_origins)],
        lifespan=lifespan,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.thinwire = server
    return app
