"""What the server does for the browser's sake: refuse a state change another site's page
asks for with this site's cookies, and send the headers that keep responses from being
sniffed, framed or leaking the page's URL.

A request is same-origin when its `Origin` (scheme, host and port) is the one the request
was made to; `allowed_origins` names other sites trusted to act with this site's
credentials (the same list the WebSocket handshake and CORS use). A request without an
`Origin` and without `Sec-Fetch-Site` comes from no browser page (curl, a server):
ambient cookies are not at stake there, so it passes.

That check trusts the Host header, which a page of another site can choose by DNS
rebinding (its own name, pointed at this server's address), so an app that needs no
credentials (`anonymous`) also checks the Host: a name no other site's DNS can answer
for (an IP address, a single label such as `localhost`, a `.localhost` name), one of
`allowed_hosts`, or the host of an allowed origin.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Collection

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from thinwire.boundary import error_response
from thinwire.errors import BadRequest, Forbidden, ThinwireError, quoted

__all__ = [
    "COMMON_HEADERS",
    "PAGE_HEADERS",
    "BrowserGuard",
    "HostCheck",
    "cross_site",
    "name_of",
    "origin_of",
    "refuse_handshake",
]

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


async def refuse_handshake(
    scope: Scope, receive: Receive, send: Send, error: ThinwireError
) -> None:
    """Refuse a WebSocket before it opens, with `error` as HTTP answers it (typed, the
    protocol named) where the ASGI server can answer a handshake (the denial extension:
    uvicorn's can); else closed with 4403, which the ASGI server answers with a bare 403."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 4403})
        return
    response = error_response(error)
    response.raw_headers += COMMON_HEADERS
    await response(scope, receive, send)


def host_name(scope: Scope) -> str:
    """The Host header's name (`name_of`)."""
    return name_of(Headers(scope=scope).get("host", ""))


def name_of(host: str) -> str:
    """A host's name, without its port (an IPv6 address without brackets), lower case."""
    host = host.lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.rsplit(":", 1)[-1].isdigit() else host


class HostCheck:
    """Which Host names a server answers to: any a site's DNS cannot be made to point at
    it, and `allowed` (exact names, `*.example.com` for its subdomains, `*` for any)."""

    def __init__(self, allowed: Collection[str]) -> None:
        names = {name.lower().rstrip(".") for name in allowed}
        self.any = "*" in names
        self.suffixes = tuple(name[1:] for name in names if name.startswith("*."))
        self.names = names

    def allows(self, name: str) -> bool:
        name = name.rstrip(".")
        if self.any or name in self.names or name.endswith(self.suffixes):
            return True
        if "." not in name or name.endswith(".localhost"):
            return True  # localhost, a machine's name: not on the public DNS
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        return True  # an address: a rebinding page is always at a name


class BrowserGuard:
    """ASGI middleware: refuses cross-site state changes (`403 origin_not_allowed`), and
    with `hosts` requests to other host names (`400 host_not_allowed`, WebSockets at the
    handshake); adds the common security headers to every HTTP response."""

    def __init__(
        self, app: ASGIApp, allowed_origins: Collection[str] = (), hosts: HostCheck | None = None
    ) -> None:
        self.app = app
        self.allowed_origins = frozenset(o.lower().rstrip("/") for o in allowed_origins)
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            if (refusal := self.host_refusal(scope)) is not None:
                await refuse_handshake(scope, receive, send, refusal)
                return
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *COMMON_HEADERS]
            await send(message)

        refusal = self.host_refusal(scope) or self.origin_refusal(scope)
        if refusal is not None:
            await error_response(refusal)(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def origin_refusal(self, scope: Scope) -> ThinwireError | None:
        if scope["method"] not in STATE_CHANGING or not cross_site(scope, self.allowed_origins):
            return None
        return Forbidden(
            "origin_not_allowed",
            "a page of another site may not do this with this site's credentials "
            "(create_app's allowed_origins does not list its origin)",
        )

    def host_refusal(self, scope: Scope) -> ThinwireError | None:
        if self.hosts is None or self.hosts.allows(host_name(scope)):
            return None
        return BadRequest(
            "host_not_allowed",
            f"this server does not answer to the host {quoted(host_name(scope), 100)} "
            "(create_app's allowed_hosts does not list it; for thinwire demo, "
            "$THINWIRE_ALLOWED_HOSTS)",
        )
