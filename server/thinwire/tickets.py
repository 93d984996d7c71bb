"""Tickets: a short-lived credential for one WebSocket handshake.

A browser cannot put headers on a WebSocket, so an app that authenticates with a bearer
token cannot open one as it sends every other request. Instead the client asks
`POST /agents/{agent}/tickets` with its headers — `identify` runs as for any request —
and opens `…/ws?ticket=…`. A ticket names its principal and agent, is signed with the
coordinator's secret (shared by replicas, so any of them accepts it), lasts `TICKET_TTL`
seconds and opens one socket on the process that sees it first.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections import OrderedDict

from thinwire import wire

__all__ = ["TICKET_TTL", "Tickets"]

#: Seconds a ticket stays good for: long enough to open a socket, not to be worth stealing.
TICKET_TTL = 60.0
#: Tickets remembered as used, per process.
USED_KEPT = 10_000


class Tickets:
    def __init__(self, secret: bytes, ttl: float = TICKET_TTL) -> None:
        self._secret = secret
        self.ttl = ttl
        self._used: OrderedDict[str, float] = OrderedDict()  # signature -> expiry

    def _signature(self, payload: str) -> str:
        digest = hmac.new(self._secret, payload.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    def issue(self, principal: str, agent: str) -> wire.Ticket:
        claims = json.dumps([principal, agent, round(time.time() + self.ttl, 3)])
        payload = base64.urlsafe_b64encode(claims.encode()).decode().rstrip("=")
        return wire.Ticket(ticket=f"{payload}.{self._signature(payload)}", expires_in=self.ttl)

    def redeem(self, ticket: str, agent: str) -> str | None:
        """The principal the ticket was issued to, if it is genuine, for `agent`, unexpired
        and not used before; None otherwise."""
        payload, _, signature = ticket.partition(".")
        if not signature or not hmac.compare_digest(signature, self._signature(payload)):
            return None
        try:
            principal, ticket_agent, expires = json.loads(
                base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            )
        except ValueError:
            return None
        now = time.time()
        if ticket_agent != agent or expires < now or signature in self._used:
            return None
        self._used[signature] = expires
        while self._used and (len(self._used) > USED_KEPT or next(iter(self._used.values())) < now):
            self._used.popitem(last=False)
        return str(principal)
