"""Mounting a thinwire app inside another Starlette or FastAPI app, lifespan and all.

    api = create_app({"librarian": Librarian}, identify=identify)
    app = FastAPI()
    mount(app, "/api", api)          # the hook then uses baseUrl: "/api"

Starlette's own `Mount` runs no lifespan of the app it mounts, so a thinwire app mounted
that way never starts (no startup checks, no expiry of old frames) and never shuts down
(SIGTERM loses the partial reply). `mount` adds the route and runs the thinwire app's
lifespan inside the parent's.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.routing import Mount

__all__ = ["mount"]


def mount(parent: Starlette, path: str, app: Starlette) -> None:
    """Serve `app` under `path` of `parent` (a Starlette or FastAPI app), starting and
    stopping with it."""
    if not path.startswith("/") or path.endswith("/"):
        raise ValueError(f"mount at a path like '/api', not {path!r}")
    parent.router.routes.append(Mount(path, app=app))
    server = getattr(app.state, "thinwire", None)  # a thinwire app's: its log says where
    if server is not None:
        server.mounted_at = path
    outer = parent.router.lifespan_context

    @contextlib.asynccontextmanager
    async def both(parent_app: Any) -> AsyncIterator[Any]:
        async with app.router.lifespan_context(app), outer(parent_app) as state:
            yield state

    parent.router.lifespan_context = both
