"""JSON-RPC errors: the A2A error a client branches on, with thinwire's stable `code`.

Every error leaves as `{"code", "message", "data"}` where `data` holds one
`google.rpc.ErrorInfo` whose `reason` names the A2A error and whose `metadata` (a map of
strings) carries thinwire's `code`, `retryable` ("true" or "false") and, when a retry
may succeed and the server knows when, `retryAfter` in seconds (HTTP's `Retry-After`).
Thinwire's own errors are mapped by kind, in one place (`from_thinwire`):

    404 (context_not_found, turn_not_found, …)     -32001 TaskNotFoundError
    409 (context_busy, decision_pending, …)        -32004 UnsupportedOperationError
    400 and 413 (invalid_decision, …)              -32602 invalid params
    invalid_json                                   -32700 parse error
    body_too_large, unsupported_media_type, 408    -32600 invalid request
    anything else (rate_limited, store_unavailable) -32603 internal error
"""

from __future__ import annotations

from typing import Any

from thinwire.codes import ErrorCode
from thinwire.errors import ThinwireError, whole_seconds

__all__ = [
    "CONTENT_TYPE_NOT_SUPPORTED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "PUSH_NOTIFICATION_NOT_SUPPORTED",
    "TASK_NOT_CANCELABLE",
    "TASK_NOT_FOUND",
    "UNSUPPORTED_OPERATION",
    "VERSION_NOT_SUPPORTED",
    "RpcError",
    "error_body",
    "from_thinwire",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOTIFICATION_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
VERSION_NOT_SUPPORTED = -32009

#: The `ErrorInfo.reason` of each code, as the A2A specification names it.
REASONS = {
    PARSE_ERROR: "PARSE_ERROR",
    INVALID_REQUEST: "INVALID_REQUEST",
    METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    INVALID_PARAMS: "INVALID_PARAMS",
    INTERNAL_ERROR: "INTERNAL_ERROR",
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOTIFICATION_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
}
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


class RpcError(Exception):
    """An A2A error (`rpc_code`) with thinwire's code for what went wrong."""

    def __init__(
        self,
        rpc_code: int,
        code: ErrorCode,
        message: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.rpc_code = rpc_code
        self.code: ErrorCode = code
        self.message = message
        self.retryable = retryable
        #: Seconds after which the same call may succeed, where that is known.
        self.retry_after = retry_after


def from_thinwire(error: ThinwireError) -> RpcError:
    if error.code == "invalid_json":
        rpc_code = PARSE_ERROR
    elif error.status == 404:
        rpc_code = TASK_NOT_FOUND
    elif error.status == 409:
        rpc_code = UNSUPPORTED_OPERATION
    elif error.status in (400, 413) and error.code != "body_too_large":
        rpc_code = INVALID_PARAMS
    elif 400 <= error.status < 500 and error.status != 429:
        rpc_code = INVALID_REQUEST
    else:
        rpc_code = INTERNAL_ERROR
    return RpcError(
        rpc_code,
        error.code,
        error.message,
        retryable=error.retryable,
        retry_after=error.retry_after,
    )


def error_body(rpc_id: str | int | None, error: RpcError) -> dict[str, Any]:
    metadata = {"code": error.code, "retryable": "true" if error.retryable else "false"}
    if error.retryable and error.retry_after is not None:  # whole seconds, as Retry-After
        metadata["retryAfter"] = whole_seconds(error.retry_after)
    info = {
        "@type": ERROR_INFO,
        "reason": REASONS[error.rpc_code],
        "domain": "a2a-protocol.org",
        "metadata": metadata,
    }
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "error": {"code": error.rpc_code, "message": error.message, "data": [info]},
    }
