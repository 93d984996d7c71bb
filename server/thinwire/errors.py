"""The one exception tree. Every error a client can see has a stable `code` and a status.

    ThinwireError                      500  internal_error (a code from `thinwire.codes`)
    ├── BadRequest                     400  invalid_json, invalid_request, invalid_context_id,
    │   │                                   invalid_decision, protocol_mismatch, …
    │   └── StateValueError                 invalid_state_value (also a TypeError)
    ├── Unauthorized                   401  unauthenticated (UI), unauthorized (operator API)
    ├── Forbidden                      403  origin_not_allowed
    │   └── WriteDenied                     write_denied (also a PermissionError)
    ├── NotFound                       404  agent_not_found, context_not_found, not_found, …
    ├── MethodNotAllowed               405  method_not_allowed
    ├── RequestTimeout                 408  request_timeout (the body did not arrive)
    ├── Conflict                       409  context_busy, interrupt_answered
    │   └── DecisionPending                 decision_pending (names the interrupt)
    ├── PreconditionFailed             412  version_mismatch
    ├── PayloadTooLarge                413  body_too_large, message_too_large
    ├── UnsupportedMediaType           415  unsupported_media_type
    ├── TooManyRequests                429  rate_limited, too_many_runs, too_many_streams
    ├── StoreError                     503  store_unavailable (the store failed or is away)
    │   ├── VersionConflict            409  version_conflict (a compare-and-set lost)
    │   ├── AlreadyExists              409  version_conflict (the id is taken)
    │   └── LeaseLost                  409  version_conflict (another replica took over)
    ├── AgentFailed                    500  agent_error (an agent could not even be created)
    ├── Misconfigured                       the app cannot start (never reaches a client)
    │   └── DataFormatTooNew                the store holds a newer release's data
    ├── ModelError                          a model's server failed: an `agent_error` frame,
    │                                       retryable where a retry could help
    └── RunTooLong                          run_too_long (sent as an `error` frame)

The app maps the tree to the wire in one place (`app.py`); stores map their driver's
errors into `StoreError` with `raise … from exc`, so no `sqlite3` or `redis` exception
reaches a response. Agent code failures are not in this tree: the runner catches them,
logs them under a reference and sends the client an `agent_error` naming only that.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from thinwire.codes import RETRYABLE_CODES, ErrorCode

__all__ = [
    "AgentFailed",
    "AlreadyExists",
    "BadRequest",
    "Conflict",
    "DataFormatTooNew",
    "DecisionPending",
    "Forbidden",
    "LeaseLost",
    "MethodNotAllowed",
    "Misconfigured",
    "ModelError",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "RequestTimeout",
    "RunTooLong",
    "StateValueError",
    "StoreError",
    "ThinwireError",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "VersionConflict",
    "WriteDenied",
    "quoted",
    "whole_seconds",
]

#: Characters of a client's text, at most, that an error message quotes.
QUOTED = 64


def quoted(text: str, length: int = QUOTED) -> str:
    """A client's text (a key, a name, a path) as an error message quotes it: its first
    `length` characters, then "…", and what a reader would not see — control and bidi
    characters — as escapes (`repr`), so that the message neither grows with the request
    nor reads as anything but what the client sent."""
    return repr(text[:length]) + ("…" if len(text) > length else "")


def whole_seconds(seconds: float) -> str:
    """A wait as HTTP's `Retry-After` says it: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(seconds)))


class ThinwireError(Exception):
    status = 500
    #: Seconds after which the same request may succeed, where that is known.
    retry_after: float | None = None

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ErrorCode = code
        self.message = message

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed when tried again later."""
        return self.code in RETRYABLE_CODES


class BadRequest(ThinwireError):
    status = 400


class Unauthorized(ThinwireError):
    status = 401


class Forbidden(ThinwireError):
    status = 403


class NotFound(ThinwireError):
    status = 404


class MethodNotAllowed(ThinwireError):
    status = 405


class RequestTimeout(ThinwireError):
    status = 408


class Conflict(ThinwireError):
    status = 409


class PreconditionFailed(ThinwireError):
    status = 412


class PayloadTooLarge(ThinwireError):
    status = 413


class UnsupportedMediaType(ThinwireError):
    status = 415


class TooManyRequests(ThinwireError):
    status = 429

    def __init__(self, code: ErrorCode, message: str, *, retry_after: float = 1.0) -> None:
        super().__init__(code, message)
        self.retry_after = retry_after


class DecisionPending(Conflict):
    def __init__(self, interrupt_id: str) -> None:
        # Shown as it is by pages: the id is in the error's `interruptId`, not the words.
        super().__init__("decision_pending", "the agent waits for an answer to its question")
        self.interrupt_id = interrupt_id


class StateValueError(BadRequest, TypeError):
    """A value written to AgentState is not plain JSON, or is over the agent's size limit,
    or its key is no key name; so, raised in the agent's code, is a value added to
    `run.history`, a tool's arguments or output, a step's result or an interrupt's
    payload or schema that is not JSON (the message says which)."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_state_value", message)


class WriteDenied(Forbidden, PermissionError):
    """A write to keys outside `writable_keys`."""

    def __init__(self, keys: Iterable[str], writable: Iterable[str]) -> None:
        self.keys = sorted(keys)
        super().__init__(
            "write_denied",
            f"not writable: {', '.join(map(repr, self.keys))}; "
            f"writable keys are {sorted(writable)}",
        )


class StoreError(ThinwireError):
    """The store failed to do what was asked; nothing of it landed."""

    status = 503
    retry_after = 1.0

    def __init__(self, message: str, code: ErrorCode = "store_unavailable") -> None:
        super().__init__(code, message)


class VersionConflict(StoreError):
    """A compare-and-set save found another version than the one expected."""

    status = 409

    def __init__(self, context_id: str, expected: int, actual: int | None) -> None:
        super().__init__(
            f"{context_id}: expected version {expected}, found {actual}", "version_conflict"
        )
        self.context_id = context_id
        self.expected = expected
        self.actual = actual


class AlreadyExists(StoreError):
    status = 409

    def __init__(self, context_id: str) -> None:
        super().__init__(f"{context_id} exists already", "version_conflict")


class LeaseLost(StoreError):
    """A fenced save whose lease has expired or passed to another owner."""

    status = 409

    def __init__(self, message: str) -> None:
        super().__init__(message, "version_conflict")


class AgentFailed(ThinwireError):
    """The agent failed where no run could report it (its constructor, say): the client
    gets a reference to the server log, never the exception's text."""

    def __init__(self, reference: str) -> None:
        super().__init__("agent_error", f"The agent could not be created. Reference: {reference}.")


class Misconfigured(ThinwireError):
    """The app cannot start as configured: raised at startup, with what to change."""

    def __init__(self, message: str) -> None:
        super().__init__("internal_error", message)


class DataFormatTooNew(Misconfigured):
    """The store holds data a newer release wrote (its data format is above the one this
    release knows): reading it could misread it, and writing to it could spoil it."""

    def __init__(self, where: str, found: int, known: int) -> None:
        super().__init__(
            f"{where} holds data format {found}, written by a newer thinwire; this release "
            f"reads up to format {known}: upgrade thinwire, or restore a backup taken before "
            "the newer release opened it"
        )
        self.found = found
        self.known = known


class ModelError(ThinwireError):
    """A model's server failed. `reason` is ours, a few words a client may see ("rate
    limited"); what the server said is in the exception's cause, for the log only."""

    status = 502

    def __init__(self, reason: str, *, retryable: bool) -> None:
        super().__init__("agent_error", f"the model failed: {reason}")
        self.reason = reason
        self._retryable = retryable

    @property
    def retryable(self) -> bool:
        return self._retryable


class RunTooLong(ThinwireError):
    """A run emitted more frames than one seq lease allows."""

    def __init__(self, message: str) -> None:
        super().__init__("run_too_long", message)
