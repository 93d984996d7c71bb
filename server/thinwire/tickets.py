"""Tickets: a short-lived credential for one WebSocket handshake.

A browser cannot put headers on a WebSocket, so an app that authenticates with a bearer
token cannot open one as it sends every other request. Instead the client asks
`POST /agents/{agent}/tickets` with its headers — `identify` runs as for any request —
and opens `…/ws?ticket=…`. A ticket names its principal and agent, is signed with the
coordinator's secret (shared by replicas, so any of them accepts it), lasts `TICKET_TTL`
seconds and opens one socket: its use is recorded through the coordinator, so a second
handshake with it fails on every replica.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import time

from thinwire import wire
from thinwire.coordination import Coordinator

__all__ = ["TICKET_TTL", "Tickets"]

#: Seconds a ticket stays good for: long enough to open a socket, not to be worth stealing.
TICKET_TTL = 60.0
#: Seconds a used ticket is remembered after it expires, so that a replica whose clock
#: lags by less than this still refuses it.
USED_MARGIN = 30.0
#: Seconds between two rereads of the shared secret caused by a signature that failed: a
#: forged ticket cannot make each handshake a read of the store.
REREAD_EVERY = 1.0


def sign(secret: bytes, payload: str) -> str:
    digest = hmac.new(secret, payload.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def signed_by(secret: bytes, payload: str, signature: str) -> bool:
    # Compared as bytes: `compare_digest` refuses a str that is not ASCII, and a ticket
    # is whatever the query string held.
    expected = sign(secret, payload).encode()
    return hmac.compare_digest(signature.encode("utf-8", "replace"), expected)


class Tickets:
    def __init__(self, coordinator: Coordinator, ttl: float = TICKET_TTL) -> None:
        self.coordinator = coordinator
        self.ttl = ttl
        #: The shared secret as last read.
        self._secret: bytes | None = None
        #: When a failed signature last made us reread it (monotonic).
        self._reread_at = -math.inf

    async def _read_secret(self) -> bytes:
        self._secret = await self.coordinator.secret()
        return self._secret

    async def issue(self, principal: str, agent: str) -> wire.Ticket:
        # Signed with the secret as it is now, not a copy: had the store lost it and
        # another replica made a new one, a copy would sign tickets no one else accepts.
        secret = await self._read_secret()
        claims = json.dumps([principal, agent, round(time.time() + self.ttl, 3)])
        payload = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
        return wire.Ticket(ticket=f"{payload}.{sign(secret, payload)}", expires_in=self.ttl)

    async def redeem(self, ticket: str, agent: str) -> str | None:
        """The principal the ticket was issued to, if it is genuine, for `agent`, unexpired
        and not used before on any replica; None otherwise. Raises `StoreError` when the
        coordinator cannot say whether it was used."""
        payload, _, signature = ticket.partition(".")
        secret = await self._genuine(payload, signature) if signature else None
        if secret is None:
            return None
        try:
            principal, ticket_agent, expires = json.loads(
                base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            )
        except ValueError:
            return None
        now = time.time()
        if ticket_agent != agent or expires < now:
            return None
        if not await self.coordinator.use_once(signature, expires - now + USED_MARGIN, secret):
            return None
        return str(principal)

    async def _genuine(self, payload: str, signature: str) -> bytes | None:
        """The shared secret the ticket is signed with, if it is. A signature the copy in
        hand refuses rereads it (once a `REREAD_EVERY` at most): the store may have lost
        the secret and another replica made the one this ticket was signed with."""
        secret = self._secret or await self._read_secret()
        if signed_by(secret, payload, signature):
            return secret
        if time.monotonic() - self._reread_at < REREAD_EVERY:
            return None
        self._reread_at = time.monotonic()
        fresh = await self._read_secret()
        if fresh != secret and signed_by(fresh, payload, signature):
            return fresh
        return None
