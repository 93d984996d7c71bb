"""The exception tree. Every error a client can see has a stable `code` and an HTTP status.

    ThinwireError                  500 (never raised on purpose at the boundary)
    ├── BadRequest                 400  invalid_json, invalid_request, invalid_context_id,
    │                                   protocol_mismatch
    ├── Unauthorized               401  unauthenticated (UI), unauthorized (operator API)
    ├── Forbidden                  403  write_denied
    ├── NotFound                   404  agent_not_found, context_not_found, not_found
    ├── MethodNotAllowed           405  method_not_allowed
    ├── Conflict                   409  context_busy, version_conflict, interrupt_answered
    │   └── DecisionPending        409  decision_pending (names the interrupt)
    ├── PreconditionFailed         412  version_mismatch
    ├── PayloadTooLarge            413  body_too_large, message_too_large
    ├── UnsupportedMediaType       415  unsupported_media_type
    └── TooManyRequests            429  rate_limited

Agent code failures are not in this tree: the runner catches them, logs them with an id
and sends the client a generic `agent_error` frame that names only that id.
"""

from __future__ import annotations

__all__ = [
    "BadRequest",
    "Conflict",
    "DecisionPending",
    "Forbidden",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "ThinwireError",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
]


class ThinwireError(Exception):
    status = 500

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class BadRequest(ThinwireError):
    status = 400


class Unauthorized(ThinwireError):
    status = 401


class Forbidden(ThinwireError):
    status = 403


class PreconditionFailed(ThinwireError):
    status = 412


class UnsupportedMediaType(ThinwireError):
    status = 415


class PayloadTooLarge(ThinwireError):
    status = 413


class NotFound(ThinwireError):
    status = 404


class MethodNotAllowed(ThinwireError):
    status = 405


class Conflict(ThinwireError):
    status = 409


class TooManyRequests(ThinwireError):
    status = 429


class DecisionPending(Conflict):
    def __init__(self, interrupt_id: str) -> None:
        super().__init__("decision_pending", f"answer the pending interrupt {interrupt_id} first")
        self.interrupt_id = interrupt_id
