"""The protocol's vocabulary: every error code and WebSocket close code a client can meet.

The source of truth for both sides: `make schema` generates the TypeScript constants and
the `ErrorCode` union from these tables, and `ThinwireError` accepts no other code.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "CLIENT_ERROR_CODES",
    "CLOSE_CODES",
    "ERROR_CODES",
    "RETRYABLE_CODES",
    "ClientErrorCode",
    "ErrorCode",
    "ServerErrorCode",
]

ServerErrorCode = Literal[
    "agent_error",
    "agent_not_found",
    "binary_not_supported",
    "body_too_large",
    "branch_moved",
    "branch_not_found",
    "context_busy",
    "context_not_found",
    "data_too_large",
    "decision_pending",
    "host_not_allowed",
    "http_error",
    "internal_error",
    "interrupt_answered",
    "interrupt_not_found",
    "invalid_context_id",
    "invalid_decision",
    "invalid_json",
    "invalid_request",
    "invalid_state_value",
    "message_already_sent",
    "message_too_large",
    "method_not_allowed",
    "no_run",
    "not_a_user_turn",
    "not_found",
    "nothing_to_regenerate",
    "origin_not_allowed",
    "protocol_mismatch",
    "rate_limited",
    "request_timeout",
    "run_interrupted",
    "run_too_long",
    "server_busy",
    "store_error",
    "store_unavailable",
    "title_too_long",
    "too_many_branches",
    "too_many_runs",
    "too_many_streams",
    "turn_not_found",
    "unauthenticated",
    "unauthorized",
    "unsupported_media_type",
    "version_conflict",
    "version_mismatch",
    "write_denied",
]

ClientErrorCode = Literal[
    "aborted",
    "disposed",
    "invalid_url",
    "network_error",
    "no_pending_interrupt",
    "protocol_error",
    "run_failed",
    "stream_interrupted",
    "websocket_unavailable",
]

ErrorCode = Literal[ServerErrorCode, ClientErrorCode]

#: What each code the server sends means.
ERROR_CODES: dict[ServerErrorCode, str] = {
    "agent_error": "The agent failed; the message names a reference to the server log.",
    "agent_not_found": "No agent of that name is served here.",
    "binary_not_supported": "WebSocket messages must be JSON text.",
    "body_too_large": "The request body or WebSocket message exceeds the size limit.",
    "branch_moved": (
        "The conversation moved on from the turn this follows (another tab added to it, or "
        "cleared it): load the transcript and send again."
    ),
    "branch_not_found": "No alternative of that index at that turn.",
    "context_busy": "Another run or change holds the conversation; try again.",
    "context_not_found": "No such conversation for this agent and caller.",
    "data_too_large": "The data sent with a message exceeds the size limit.",
    "decision_pending": "The conversation waits for a decision; answer it first.",
    "host_not_allowed": "This server does not answer to that host name.",
    "http_error": "An HTTP error without a more specific code.",
    "internal_error": "The server failed; nothing the client did.",
    "interrupt_answered": "That interrupt was answered already.",
    "interrupt_not_found": "No such pending interrupt.",
    "invalid_context_id": "A context id is 'ctx-' followed by 36 lowercase hex digits.",
    "invalid_decision": "The decision is not one of the options or does not fit the schema.",
    "invalid_json": "The body or message is not valid JSON.",
    "invalid_request": "The request does not fit its schema.",
    "invalid_state_value": "An AgentState value is not JSON or is too large, or its key no name.",
    "message_already_sent": "That message was sent already; its reply is in the transcript.",
    "message_too_large": "The user message exceeds the size limit.",
    "method_not_allowed": "That method is not allowed on this route.",
    "no_run": "There is no run to attach to.",
    "not_a_user_turn": "Only a user's turn can be edited.",
    "not_found": "No such route.",
    "nothing_to_regenerate": "The conversation has no reply to regenerate.",
    "origin_not_allowed": "A page of another site may not act with this site's credentials.",
    "protocol_mismatch": "Client and server speak different protocol versions.",
    "rate_limited": "Too many runs started; try again shortly.",
    "request_timeout": "The request body did not arrive in time.",
    "run_interrupted": "The run's server stopped before the run ended; send it again.",
    "run_too_long": "The run sent more frames than one run may.",
    "server_busy": "The server has all the connections it takes; try again shortly.",
    "store_error": "The run's reply could not be saved.",
    "store_unavailable": "The store did not answer; try again shortly.",
    "title_too_long": "A title is at most 200 characters.",
    "too_many_branches": (
        "The conversation made as many branches as one may (65,536): start a new one."
    ),
    "too_many_runs": "Too many runs in progress at once; try again when one ends.",
    "too_many_streams": "Too many streams open at once.",
    "turn_not_found": "No such turn on the conversation's current branch.",
    "unauthenticated": "Sign in to talk to this agent.",
    "unauthorized": "The operator API needs its bearer token.",
    "unsupported_media_type": "Send the body as application/json.",
    "version_conflict": "Someone else changed the conversation meanwhile.",
    "version_mismatch": "The If-Match version is not the current one.",
    "write_denied": "Those AgentState keys are not writable.",
}

#: What each code the client raises by itself means (it never comes from the server).
CLIENT_ERROR_CODES: dict[ClientErrorCode, str] = {
    "aborted": "reset() or dispose() cancelled the work.",
    "disposed": "The client was used after dispose().",
    "invalid_url": "No URL can be resolved from the options: give an absolute baseUrl.",
    "network_error": "The request or the stream failed below HTTP.",
    "no_pending_interrupt": "decide() was called with no decision pending.",
    "protocol_error": "The server sent something that is not a frame.",
    "run_failed": "The run ended with stop reason error and no error frame.",
    "stream_interrupted": "The stream ended before its done frame.",
    "websocket_unavailable": "This environment has no WebSocket; pass one to WebSocketTransport.",
}

#: Codes for which the same request may succeed if tried again later.
RETRYABLE_CODES: frozenset[ErrorCode] = frozenset(
    {
        "context_busy",
        "network_error",
        "rate_limited",
        "run_interrupted",
        "server_busy",
        "store_error",
        "store_unavailable",
        "stream_interrupted",
        "too_many_runs",
        "too_many_streams",
    }
)

#: The WebSocket close codes the server uses, with the error a client reports for each
#: (1012 is uvicorn's, as `thinwire serve` shuts down).
CLOSE_CODES: dict[int, ErrorCode] = {
    1002: "protocol_mismatch",
    1003: "binary_not_supported",
    1007: "invalid_json",
    1009: "body_too_large",
    1011: "internal_error",
    1012: "network_error",  # the server is restarting (uvicorn, on SIGTERM): connect again
    1013: "network_error",  # a slow consumer was dropped: attach again
    4401: "unauthenticated",
    4403: "origin_not_allowed",
    4404: "agent_not_found",
    4429: "too_many_streams",
}

assert set(ERROR_CODES) == set(get_args(ServerErrorCode)), "describe every server code"
assert set(CLIENT_ERROR_CODES) == set(get_args(ClientErrorCode)), "describe every client code"
