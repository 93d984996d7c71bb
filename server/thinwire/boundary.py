"""Where errors meet HTTP: the exception tree mapped to typed JSON responses, in one place.

Every error leaves as `{"error": {"code", "message", "retryable"}}` with its status;
503 and 429 say when to come back (`Retry-After`). An exception outside the tree is a
bug: it leaves as a bare `500 internal_error`, its text in the log only.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Mapping, Sequence

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import Scope

from thinwire import wire
from thinwire.errors import MethodNotAllowed, NotFound, ThinwireError, quoted, whole_seconds
from thinwire.metrics import METRICS

__all__ = ["EXCEPTION_HANDLERS", "PROTOCOL_HEADERS", "error_response"]

#: On every response of the protocol: nothing cached, the version named.
PROTOCOL_HEADERS = {"Cache-Control": "no-store", wire.PROTOCOL_HEADER: wire.PROTOCOL_VERSION}

logger = logging.getLogger("thinwire")

#: Refusals of a body left unread: what is left of it would be read as the next request,
#: so the connection ends with the answer rather than when keep-alive gives up on it.
BODY_UNREAD = frozenset({"body_too_large", "request_timeout"})


def error_response(error: ThinwireError, headers: Mapping[str, str] | None = None) -> Response:
    METRICS.http_error(error.code, error.status)
    detail = wire.ErrorDetail(
        code=error.code,
        message=error.message,
        retryable=error.retryable,
        interrupt_id=getattr(error, "interrupt_id", None),
    )
    extra = dict(headers or {})
    if error.retry_after is not None:
        extra["Retry-After"] = whole_seconds(error.retry_after)
    if error.code in BODY_UNREAD:
        extra["Connection"] = "close"
    return JSONResponse(
        wire.ErrorBody(error=detail).model_dump(by_alias=True, exclude_none=True),
        status_code=error.status,
        headers={**PROTOCOL_HEADERS, **extra},
    )


async def on_thinwire_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ThinwireError)
    challenge = {"WWW-Authenticate": "Bearer"} if exc.code == "unauthorized" else None
    return error_response(exc, challenge)


async def on_http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 in the same typed shape as ours."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        # Routed from the app's root again (inside its own mount the scope is the
        # mount's), or from where the app is mounted in another.
        scope, routes = request.scope, request.app.router.routes
        top = {**scope, "root_path": scope.get("app_root_path", "")}
        methods = allowed_methods(routes, top) or allowed_methods(routes, scope)
        allow = {"Allow": ", ".join(sorted(methods))} if methods else None
        return error_response(MethodNotAllowed("method_not_allowed", "method not allowed"), allow)
    if exc.status_code == 404:
        return error_response(
            NotFound("not_found", f"no route for {quoted(request.url.path, 200)}")
        )
    error = ThinwireError("http_error", str(exc.detail))
    error.status = exc.status_code
    return error_response(error)


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> set[str]:
    """Every method some route of this path takes (Starlette's own 405 names only the
    first route's: a path with a route per method would seem to take one)."""
    methods: set[str] = set()
    for route in routes:
        match, child = route.matches(scope)
        if match == Match.NONE:
            continue
        if isinstance(route, Mount):
            methods |= allowed_methods(route.routes, {**scope, **child})
        else:
            methods |= getattr(route, "methods", None) or set()
    return methods


async def on_unexpected_error(request: Request, exc: Exception) -> Response:
    reference = "err-" + secrets.token_hex(6)
    logger.error("unexpected error on %s (%s)", request.url.path[:200], reference, exc_info=exc)
    return error_response(ThinwireError("internal_error", f"Server error. Reference: {reference}."))


EXCEPTION_HANDLERS = {
    ThinwireError: on_thinwire_error,
    HTTPException: on_http_error,
    Exception: on_unexpected_error,
}
