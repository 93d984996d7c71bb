"""Who is asking: the principal a request acts for, from trusted authentication.

A context id is a capability to address a conversation, never an identity. The app's
`identify(connection)` returns the principal (a user id) from whatever the app trusts — a
session cookie, a verified token, a header set by an authenticating proxy — or None when
the request is not authenticated (401 `unauthenticated`). A context belongs to the
principal that created it.

    async def identify(connection: HTTPConnection) -> str | None:
        session = await sessions.verify(connection.cookies.get("session"))
        return session.user_id if session else None

    app = create_app(agents, identify=identify)

`anonymous` is the explicit opt-out: every request is the same principal, so anyone who
holds a context id can use that conversation. Fit for demos and single-user tools only.
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable

from starlette.requests import HTTPConnection

from thinwire.errors import ThinwireError, Unauthorized

__all__ = ["ANONYMOUS", "Identify", "SignedValue", "anonymous", "principal_of"]

Identify = Callable[[HTTPConnection], "str | Awaitable[str | None] | None"]

ANONYMOUS = "anonymous"

logger = logging.getLogger("thinwire")


def anonymous(connection: HTTPConnection) -> str:
    """Every request is the same principal. Demos and single-user tools only."""
    return ANONYMOUS


async def principal_of(connection: HTTPConnection, identify: Identify) -> str:
    """Who `connection` acts for. An `identify` that fails (raises, or answers other than
    a str) is the app's bug: logged, and answered as a typed `internal_error` on every
    face, so no exception reaches the server (which would drop the connection)."""
    try:
        principal = identify(connection)
        if inspect.isawaitable(principal):
            principal = await principal
        if principal is not None and not isinstance(principal, str):
            # A user id of 1 and one of "1" would own different conversations, and only
            # one of them would come back from a store that keeps text.
            raise TypeError(
                "identify must return the principal as a str (or None), "
                f"not {type(principal).__name__}"
            )
    except ThinwireError:
        raise  # the app's own typed refusal
    except Exception as exc:
        reference = "err-" + secrets.token_hex(6)
        logger.error("identify failed (%s)", reference, exc_info=exc)
        raise ThinwireError("internal_error", f"Server error. Reference: {reference}.") from exc
    if not principal:
        raise Unauthorized("unauthenticated", "sign in to talk to this agent")
    return principal


#: The shortest secret `SignedValue` takes: a shorter one a guess could find.
SECRET_BYTES = 16


class SignedValue:
    """HMAC-SHA256 signing of short values, e.g. a user name kept in a cookie."""

    def __init__(self, secret: bytes) -> None:
        if not isinstance(secret, bytes):
            raise TypeError(f"SignedValue's secret must be bytes, not {type(secret).__name__}")
        if len(secret) < SECRET_BYTES:
            raise ValueError(
                f"SignedValue's secret must be at least {SECRET_BYTES} bytes, not {len(secret)}"
            )
        self._secret = secret

    def _signature(self, value: str) -> str:
        return hmac.new(self._secret, value.encode(), hashlib.sha256).hexdigest()

    def sign(self, value: str) -> str:
        return f"{value}.{self._signature(value)}"

    def verify(self, signed: str) -> str | None:
        """The value if `signed` was made by `sign` with this secret, else None."""
        value, _, signature = signed.rpartition(".")
        if value and hmac.compare_digest(signature, self._signature(value)):
            return value
        return None
