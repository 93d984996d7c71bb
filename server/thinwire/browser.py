"""What the server does for the browser's sake: refuse a state change another site's page
asks for with this site's cookies, and send the headers that keep responses from being
sniffed, framed or leaking the page's URL.

A request is same-origin when its `Origin` (scheme, host and port) is the one the request
was made to; `allowed_origins` names other sites trusted to act with this site's
credentials (the same list the WebSocket handshake and CORS use). A request without an
`Origin` and without `Sec-Fetch-Site` comes from no browser page (curl, a server):
ambient cookies are not at stake there, so it passes.
"""

from __future__ import annotations

from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from thinwire.boundary import error_response
from thinwire.errors import Forbidden

__all__ = ["PAGE_HEADERS", "BrowserGuard", "cross_site", "origin_of"]

#: Methods that change something: these must come from this site's own pages.
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: Sent with every response.
COMMON_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]

#: Sent with the HTML page: scripts, styles and connections from this origin only
#: (`'self'` covers its ws:// and wss:// too), nothing inline, never in a frame.
PAGE_HEADERS = {
    "Content-Security-Policy": "; ".join(
        [
            "default-src 'self'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            "connect-src 'self'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ]
    ),
    "X-Frame-Options": "DENY",
}

SCHEMES = {"ws": "http", "wss": "https"}
DEFAULT_PORTS = {"http": "80", "https": "443"}


def origin_of(scope: Scope) -> str:
    """The origin a request was made to: its scheme (a WebSocket's as http or https) and
    its Host header, with the default port left out, as browsers send `Origin`."""
    scheme = str(scope.get("scheme", "http"))
    scheme = SCHEMES.get(scheme, scheme)
    host = Headers(scope=scope).get("host", "")
    name, _, port = host.rpartition(":") if host.rsplit(":", 1)[-1].isdigit() else (host, "", "")
    if port == DEFAULT_PORTS.get(scheme):
        host = name
    return f"{scheme}://{host}".lower()


def cross_site(scope: Scope, allowed_origins: Collection[str]) -> bool:
    """Whether a browser page of another origin, not one of `allowed_origins`, sent it."""
    headers = Headers(scope=scope)
    origin = headers.get("origin")
    if origin is not None:
        origin = origin.lower().rstrip("/")
        return origin != origin_of(scope) and origin not in allowed_origins
    # No Origin: trust Sec-Fetch-Site where a browser sent it.
    return headers.get("sec-fetch-site", "none") not in ("same-origin", "none")


class BrowserGuard:
    """ASGI middleware: refuses cross-site state changes (`403 origin_not_allowed`) and
    adds the common security headers to every HTTP response."""

    def __init__(self, app: ASGIApp, allowed_origins: Collection[str] = ()) -> None:
        self.app = app
        self.allowed_origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *COMMON_HEADERS]
            await send(message)

        if scope["method"] in STATE_CHANGING and cross_site(scope, self.allowed_origins):
            refusal = Forbidden(
                "origin_not_allowed",
                "a page of another site may not do this with this site's credentials "
                "(create_app's allowed_origins does not list its origin)",
            )
            await error_response(refusal)(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)
