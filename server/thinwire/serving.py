"""Running an app under uvicorn, as `thinwire serve` and `thinwire demo` do: the user's
module found from the working directory, and the limits that keep one client from taking
the server down.

What is done here, in the process:
- `max_connections`: past it, a new request gets 503 `server_busy` at once (uvicorn's
  `limit_concurrency`), instead of queueing until the machine runs out of memory. An
  open WebSocket is one of the connections, and a handshake past the limit is a request
  like any other.
- `header_timeout`: a connection whose request headers have not all arrived that long
  after it opened (or after its last request) is closed — slowloris, and sockets that
  never send anything.
- The WebSocket message limit is the app's own (`max_body_bytes`), enforced by the
  WebSocket layer as frames arrive, before a message is buffered whole.
- What startup made (modules, classes, the app) is frozen out of the garbage collector
  (`gc.freeze()`) before serving: a full collection then walks only what requests make,
  instead of stalling a request for 20-50 ms now and then (a cold read's p99 at 1,000
  turns went from 38 to 9 ms).
Request bodies are bounded in size and time by the app itself (`parsing.read_json`).

What belongs to a reverse proxy in production (see docs/deploy.md): per-IP connection
and request rates, TLS, and the same header and body timeouts closer to the client.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import logging
import os
import re
import socket
import sys
from types import FrameType
from typing import Any

import h11
import uvicorn
from starlette.types import Receive, Scope, Send
from uvicorn.importer import ImportFromStringError, import_from_string
from uvicorn.protocols.http import h11_impl
from uvicorn.protocols.http.h11_impl import H11Protocol

from thinwire import wire
from thinwire.app import ThinwireApp, one_line_startup_failure
from thinwire.browser import COMMON_HEADERS
from thinwire.codes import ERROR_CODES
from thinwire.jsontext import dumps
from thinwire.server import running

try:  # the WebSocket layer's own limits on a handshake
    from websockets.http11 import MAX_LINE_LENGTH as WS_MAX_LINE
    from websockets.http11 import MAX_NUM_HEADERS as WS_MAX_HEADERS
except ImportError:  # pragma: no cover - a websockets without them: its defaults
    WS_MAX_LINE, WS_MAX_HEADERS = 8192, 128

__all__ = ["DrainingServer", "HeaderTimeoutProtocol", "import_app", "run"]

#: A WebSocket message larger than this is refused when the app does not say (1 MiB).
DEFAULT_WS_MAX_SIZE = 1024 * 1024
#: Seconds streams get to end after the runs did, on SIGTERM.
STREAMS_GRACE = 3


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, closing a connection whose request headers do not
    arrive within `header_timeout` seconds."""

    header_timeout = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def _awaiting_headers(self) -> bool:
        """Between requests (none yet, or the last one answered), with the next one's
        headers not in yet."""
        between = self.cycle is None or self.cycle.response_complete
        return between and self.conn.their_state is h11.IDLE

    def _await_headers(self) -> None:
        """Start the clock while a request's headers are awaited; stop it once in."""
        if self._awaiting_headers():
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)
        else:
            self._stop_waiting()

    def _stop_waiting(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if self._awaiting_headers():
            self.transport.close()

    def _should_upgrade(self) -> bool:
        # uvicorn checks `limit_concurrency` after the upgrade, for requests only: open
        # sockets count toward it (they are connections) but a handshake past it would be
        # taken. Not upgraded, it is a request past the limit, answered 503 at once.
        return super()._should_upgrade() and not self._over_limit()

    def _over_limit(self) -> bool:
        """As uvicorn's own check, which counts this connection too."""
        limit = self.limit_concurrency
        return limit is not None and max(len(self.connections), len(self.tasks)) >= limit

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        # The WebSocket layer reads the request again, with limits of its own; past them
        # it logs an answer it never sends and leaves the connection open for good: one
        # client could hold every connection the server takes. Refused here instead.
        lines = [event.target, *(name + b": " + value for name, value in self.headers)]
        if len(self.headers) > WS_MAX_HEADERS or max(map(len, lines)) + 16 > WS_MAX_LINE:
            self.send_400_response("WebSocket handshake too large")
            return
        super().handle_websocket_upgrade(event)


def protocol_with(header_timeout: float) -> type[HeaderTimeoutProtocol]:
    return type("HeaderTimeout", (HeaderTimeoutProtocol,), {"header_timeout": header_timeout})


class NotAnApp(Exception):
    """`thinwire serve` was given something that does not name an ASGI app."""


def import_app(target: str, *, factory: bool = False) -> Any:
    """`module:attribute` as `uvicorn module:app` finds it: from the working directory
    first (an installed `thinwire` command does not put it on the path by itself). An
    error in the module itself is raised as it is, traceback and all."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = import_from_string(target)
    except ImportFromStringError as exc:
        raise NotAnApp(str(exc)) from None
    if not factory:
        refuse_if_not_an_app(found, target)
        return found
    if not callable(found):
        raise NotAnApp(
            f"{target} is {type(found).__name__!r}, not a function returning an ASGI app"
        )
    if is_asgi3(found):
        raise NotAnApp(f"{target} is an ASGI app, not a factory: serve it without --factory")
    if not takes(found, 0):
        raise NotAnApp(f"{target} takes arguments: a factory is called with none")
    app = found()
    refuse_if_not_an_app(app, f"{target}()", "returned")
    return app


def refuse_if_not_an_app(app: Any, name: str, verb: str = "is") -> None:
    """An ASGI 3 app is an async function of (scope, receive, send), or an object whose
    `__call__` is one. uvicorn runs any other callable as an ASGI 2 app, which most often
    it is not (a plain function, a factory without --factory, a class) and which would
    answer every request 500: refused here instead, in one line."""
    if not callable(app):
        raise NotAnApp(f"{name} {verb} {type(app).__name__!r}, not an ASGI app")
    if not is_asgi3(app):
        hint = "; a factory making one needs --factory" if takes(app, 0) else ""
        raise NotAnApp(
            f"{name} {verb} {kind_of(app)}, not an ASGI app (an async function of scope, "
            f"receive and send{hint})"
        )
    if not takes(app, 3):
        raise NotAnApp(f"{name} {verb} an async function that cannot take scope, receive, send")


def is_asgi3(app: Any) -> bool:
    """What uvicorn takes for an ASGI 3 app (`Config.load`, interface "auto")."""
    if inspect.isclass(app):
        return False
    if inspect.isfunction(app):
        return asyncio.iscoroutinefunction(app)
    return asyncio.iscoroutinefunction(type(app).__call__)


def takes(function: Any, count: int) -> bool:
    """`function` can be called with `count` positional arguments; True for one Python
    cannot describe (taken on trust)."""
    try:
        inspect.signature(function).bind(*(None,) * count)
    except TypeError:
        return False
    except ValueError:  # no signature to read
        return True
    return True


def kind_of(thing: Any) -> str:
    if inspect.isclass(thing):
        return f"the class {thing.__name__}"
    if inspect.isfunction(thing) or inspect.ismethod(thing):
        return f"the function {thing.__name__}"
    return f"{type(thing).__name__!r}"


#: Compact, as every other error body (`boundary.error_response`).
BUSY = dumps(
    {"error": {"code": "server_busy", "message": ERROR_CODES["server_busy"], "retryable": True}}
).encode()


async def server_busy(scope: Scope, receive: Receive, send: Send) -> None:
    """What a request past `max_connections` gets: the 503 every other error would be,
    JSON with its code, rather than uvicorn's text."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(BUSY)).encode()),
        (b"retry-after", b"1"),
        (wire.PROTOCOL_HEADER.lower().encode(), wire.PROTOCOL_VERSION.encode()),
        (b"connection", b"close"),
        *COMMON_HEADERS,
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": BUSY, "more_body": False})


def ws_max_size(app: Any) -> int:
    """The app's own message limit, where the app is a thinwire app."""
    server = getattr(getattr(app, "state", None), "thinwire", None)
    return int(getattr(server, "max_body_bytes", DEFAULT_WS_MAX_SIZE))


def reporting_misconfiguration(app: Any) -> Any:
    """An app a thinwire app is mounted in reports a misconfigured startup in one line,
    as a thinwire app served alone does itself (`one_line_startup_failure`)."""
    if isinstance(app, ThinwireApp):
        return app

    async def served(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            send = one_line_startup_failure(send)
        await app(scope, receive, send)

    return served


class DrainingServer(uvicorn.Server):
    """uvicorn's server, which on SIGTERM first stops accepting, then gives the runs in
    flight `shutdown_timeout` seconds and interrupts the rest, so that every stream ends
    with its `done` and uvicorn has nothing left to cancel."""

    shutdown_timeout = 5.0

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        drains = {
            asyncio.ensure_future(agents.drain(self.shutdown_timeout)) for agents in running()
        }
        waiting = drains
        while waiting and not self.force_exit:  # a second signal: stop waiting
            _, waiting = await asyncio.wait(waiting, timeout=0.1)
        for drain in waiting:
            drain.cancel()
        for drain in drains - waiting:
            drain.result()  # a drain's own failure, raised
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A second SIGTERM, as a second Ctrl+C does in uvicorn, stops waiting: for the
        runs, the connections and the app's own shutdown."""
        if self.should_exit:
            self.force_exit = True
        super().handle_exit(sig, frame)


TICKET = re.compile(r"(\bticket=)[^&\s\"']+")
#: A handshake's credentials, as the websockets library logs each header at debug level.
CREDENTIAL_HEADER = re.compile(
    r"^([<>] (?:cookie|set-cookie|authorization|proxy-authorization): ).+$",
    re.IGNORECASE | re.MULTILINE,
)


def without_credentials(record: logging.LogRecord) -> bool:
    """A WebSocket's ticket opens a socket for a minute and names its principal, and it
    comes in the URL, which uvicorn logs (the access line, `"WebSocket …" [accepted]`,
    the ASGI scope at trace level); at debug level the websockets library logs each
    handshake header, a cookie or a bearer token among them. Their lines show `…`
    instead."""
    if record.name == "uvicorn.access":  # its formatter reads the arguments one by one
        if isinstance(record.args, tuple) and any(
            isinstance(arg, str) and "ticket=" in arg for arg in record.args
        ):
            record.args = tuple(
                TICKET.sub(r"\1…", arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True
    try:
        message = record.getMessage()
    except Exception:  # a malformed call of someone else's: logging reports it as usual
        return True
    redacted = CREDENTIAL_HEADER.sub(r"\1…", TICKET.sub(r"\1…", message))
    if redacted != message:
        record.msg, record.args = redacted, ()
    return True


def run(
    app: Any,
    *,
    host: str,
    port: int,
    log_level: str,
    shutdown_timeout: float,
    max_connections: int,
    header_timeout: float,
    forwarded_allow_ips: str = "127.0.0.1",
    access_log: bool = True,
) -> None:
    # uvicorn's protocol answers past its `limit_concurrency` with the app its module
    # names; a uvicorn without that name answers with its own text.
    if hasattr(h11_impl, "service_unavailable"):
        h11_impl.service_unavailable = server_busy
    config = uvicorn.Config(
        reporting_misconfiguration(app),
        host=host,
        port=port,
        log_level=log_level,
        # Runs get `shutdown_timeout`; this is what uvicorn waits on top of it, for the
        # streams to send their last frames.
        timeout_graceful_shutdown=STREAMS_GRACE,
        limit_concurrency=max_connections or None,
        http=protocol_with(header_timeout),
        ws_max_size=ws_max_size(app),
        forwarded_allow_ips=forwarded_allow_ips,
        access_log=access_log,
    )
    for name in ("uvicorn.access", "uvicorn.error", "uvicorn.asgi"):  # uvicorn's loggers
        logging.getLogger(name).addFilter(without_credentials)
    server = DrainingServer(config)
    server.shutdown_timeout = shutdown_timeout
    gc.freeze()
    server.run()
