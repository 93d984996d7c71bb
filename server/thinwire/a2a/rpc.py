"""The JSON-RPC endpoint: one POST per call, answered with one JSON-RPC response, or with
an SSE stream of them for the streaming methods.

Who calls is decided first, by the app's `identify` as on every other route: no
principal is `401` (with the challenge the card's security scheme names) before the
body is read. Then the envelope, the protocol version (`A2A-Version: 1.0`, as a header
or a query parameter; none means 0.3, which this server does not speak) and the method.
Every error after that is a JSON-RPC error in a `200` response (`errors.py`), so a
client reads it whatever went wrong; an unexpected one is logged under a reference.

A notification (a request object without an `id`) gets no JSON-RPC response, as
JSON-RPC has it: `204` and an empty body, and nothing is done. Every A2A method answers
with what the client needs (a task, its id), so a call made as a notification is a
client's mistake, and a run nobody learns of would be work and a conversation for
nothing. An `"id": null` is a request, answered as any other.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from thinwire.a2a.card import A2A
from thinwire.a2a.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    VERSION_NOT_SUPPORTED,
    RpcError,
    error_body,
    from_thinwire,
)
from thinwire.a2a.lookup import Caller
from thinwire.a2a.methods import METHODS, STREAMING
from thinwire.errors import ThinwireError, Unauthorized, quoted
from thinwire.jsontext import is_unicode
from thinwire.parsing import read_json
from thinwire.routes import counted
from thinwire.server import AgentServer
from thinwire.sse import EventStream

__all__ = ["rpc_endpoint"]

logger = logging.getLogger("thinwire.a2a")

VERSION = re.compile(r"1\.0(\.[0-9]+)?")
HEADERS = {"Cache-Control": "no-store"}


def result(rpc_id: str | int | None, value: Any) -> Response:
    return JSONResponse({"jsonrpc": "2.0", "id": rpc_id, "result": value}, headers=HEADERS)


def refusal(
    rpc_id: str | int | None,
    error: RpcError,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> Response:
    return JSONResponse(error_body(rpc_id, error), status, {**HEADERS, **(headers or {})})


def valid_id(rpc_id: Any) -> bool:
    """An id JSON-RPC allows, and one the answer can carry (text valid Unicode)."""
    if isinstance(rpc_id, str):
        return is_unicode(rpc_id)
    return rpc_id is None or (isinstance(rpc_id, int) and not isinstance(rpc_id, bool))


def request_id(body: Any) -> str | int | None:
    """The id to answer with: the request's, when it is one JSON-RPC allows."""
    rpc_id = body.get("id") if isinstance(body, dict) else None
    return rpc_id if valid_id(rpc_id) else None


def request_object(body: Any) -> tuple[str, dict[str, Any] | list[Any]]:
    """The method and params of a JSON-RPC 2.0 request object (a notification too)."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "invalid_request", "a JSON-RPC 2.0 request object")
    if not valid_id(body.get("id")):
        raise RpcError(INVALID_REQUEST, "invalid_request", "id: a string, an integer or null")
    method, params = body.get("method"), body.get("params", {})
    if not isinstance(method, str) or not isinstance(params, (dict, list)):
        raise RpcError(INVALID_REQUEST, "invalid_request", "method: a string; params: an object")
    return method, params


def params_of(method: str, params: dict[str, Any] | list[Any]) -> dict[str, Any]:
    """The params of a method this server answers."""
    if method not in METHODS:
        raise RpcError(METHOD_NOT_FOUND, "invalid_request", f"no method {quoted(method)}")
    if isinstance(params, list):  # a request JSON-RPC allows, with params A2A does not
        raise RpcError(INVALID_PARAMS, "invalid_request", "params: an object (by name)")
    return params


def check_version(request: Request) -> None:
    version = request.headers.get("a2a-version") or request.query_params.get("A2A-Version")
    if not VERSION.fullmatch(version or ""):
        said = quoted(version, 16) if version else "none (0.3)"
        raise RpcError(
            VERSION_NOT_SUPPORTED, "protocol_mismatch", f"this agent speaks A2A 1.0, not {said}"
        )


def rpc_endpoint(server: AgentServer, options: A2A) -> Callable[[Request], Awaitable[Response]]:
    challenge = options.security.challenge if options.security else {}

    async def endpoint(request: Request) -> Response:
        agent = server.agent_name(request.path_params["agent"])
        try:
            principal = await server.principal(request)
        except Unauthorized as exc:
            error = RpcError(INVALID_REQUEST, exc.code, exc.message)
            return refusal(None, error, 401, challenge)
        except ThinwireError as exc:  # the app's identify failed
            return refusal(None, from_thinwire(exc))
        rpc_id = None
        try:
            body = await read_json(request, server.max_body_bytes)
            rpc_id = request_id(body)
            method, given = request_object(body)
            if "id" not in body:  # a notification: no response, so no call
                return Response(status_code=204, headers=HEADERS)
            params = params_of(method, given)
            check_version(request)
            caller = Caller(server, agent, principal, rpc_id)
            if method in STREAMING:
                return await stream(caller, method, params)
            return result(rpc_id, await call(caller, method, params))
        except RpcError as exc:
            return refusal(rpc_id, exc)
        except ThinwireError as exc:
            return refusal(rpc_id, from_thinwire(exc))
        except Exception:
            reference = "err-" + secrets.token_hex(6)
            logger.exception("unexpected error in an A2A call (%s)", reference)
            message = f"Server error. Reference: {reference}."
            return refusal(rpc_id, RpcError(INTERNAL_ERROR, "internal_error", message))

    async def call(caller: Caller, method: str, params: dict[str, Any]) -> Any:
        if method != "SendMessage":
            return await METHODS[method](caller, params)
        close = server.streams.open(caller.principal)  # it holds a connection as a stream does
        try:
            return await METHODS[method](caller, params)
        finally:
            close()

    async def stream(caller: Caller, method: str, params: dict[str, Any]) -> Response:
        """Counted among the principal's open streams from before the work starts."""
        events, close = await counted(
            server, caller.principal, lambda: METHODS[method](caller, params)
        )
        assert events is not None, "a streaming method answers with events"
        return EventStream(events, send_timeout=server.send_timeout, on_close=close)

    return endpoint
