"""Writing a stream's frames straight to uvicorn's connection.

Sent as an ASGI message, a frame passes through each middleware's send wrapper and
uvicorn's protocol machinery (h11's state machine; the websockets library's frame
encoder) before its bytes reach the socket: for a model's token, more CPU than
everything else thinwire does with it. So under uvicorn's own protocols (`thinwire
serve` runs h11 and websockets-sansio; `uvicorn[standard]` brings httptools) a stream
writes its frames to the connection's transport itself, framed as those protocols
frame them:

- HTTP/1.1, an SSE body's chunks (`<size in hex>\\r\\n<data>\\r\\n`), between the
  response's start and its end. Both of those still go through the app's stack, so the
  protocol sees the response begin and end, and the connection is ready for its next
  request.
- WebSocket, a text message as one unmasked frame, uncompressed: permessage-deflate
  allows that message by message, and the compressor never sees it, so the messages
  that are compressed still decode. Where the client takes compressed messages, one
  over COMPRESS_ABOVE characters (a burst as lines, a replay) goes the ASGI way, to be
  compressed; a token's frame is too small to be worth it.

A frame goes the ASGI way instead whenever writing it directly could differ from sending
it: the client's buffer is full (the send waits for it to drain, under the stream's send
timeout), the connection is gone or closing, the response is over.

The send used is the one the server handed the app (`SERVER_SEND`, which the app's
outermost layer records). Under anything that wraps the app (a user's middleware,
another ASGI server, uvicorn's wsproto protocol) it is not uvicorn's own, and every
frame is an ASGI message, as it always was; so it is under a uvicorn whose objects lack
a field the writers read (`CYCLE_FIELDS` and the others).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from starlette.types import Scope

try:
    from h11._writers import ChunkedWriter
    from uvicorn.protocols.http.h11_impl import RequestResponseCycle as H11Cycle
except ImportError:  # pragma: no cover - a uvicorn without its h11 protocol
    ChunkedWriter = H11Cycle = None  # type: ignore[assignment,misc]
try:
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle as HttptoolsCycle
except ImportError:  # without httptools (uvicorn[standard] brings it)
    HttptoolsCycle = None  # type: ignore[assignment,misc]
try:
    from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    from websockets.protocol import State
except ImportError:  # pragma: no cover - an older uvicorn or websockets
    WebSocketsSansIOProtocol = State = None  # type: ignore[assignment,misc]

__all__ = [
    "COMPRESS_ABOVE",
    "SERVER_SEND",
    "Writer",
    "chunk_writer",
    "connection_dropper",
    "message_writer",
    "text_frame",
]

#: The scope key under which the app's outermost layer keeps the server's own send.
SERVER_SEND = "thinwire.server_send"

#: Characters past which a message goes the ASGI way where the client takes compressed
#: messages.
COMPRESS_ABOVE = 1024

#: Writes one chunk of a started response, or one text message: False if it did not
#: (send it instead).
Writer = Callable[[Any], bool]


#: What a writer reads of uvicorn's objects: a uvicorn whose objects lack one of them
#: (renamed in a later release, say) has its frames sent the ASGI way, not a failed stream.
CYCLE_FIELDS = ("response_started", "transport", "flow", "disconnected", "response_complete")
FLOW_FIELDS = ("write_paused",)
PROTOCOL_FIELDS = (
    "handshake_complete",
    "transport",
    "conn",
    "writable",
    "close_sent",
    "disconnected",
)
CONNECTION_FIELDS = ("extensions", "state", "expect_continuation_frame")


def _server(scope: Scope, kind: Any) -> Any:
    """The object of `kind` whose `send` method the server handed the app, if it did."""
    send: Any = scope.get(SERVER_SEND)
    owner = getattr(send, "__self__", None)
    if kind is None or type(owner) is not kind:
        return None
    return owner if getattr(send, "__func__", None) is vars(kind).get("send") else None


def _websocket(scope: Scope) -> Any:
    """The uvicorn WebSocket protocol (any of its implementations) whose method the server
    handed the app as its send, if it did; matched by module, so that none need be
    imported."""
    owner = getattr(scope.get(SERVER_SEND), "__self__", None)
    return owner if type(owner).__module__.startswith("uvicorn.protocols.websockets.") else None


def _has(value: Any, fields: tuple[str, ...]) -> bool:
    return all(hasattr(value, field) for field in fields)


def chunk_writer(scope: Scope) -> Writer | None:
    """A writer of the body chunks (bytes) of the response this request has started, if
    the server is uvicorn's h11 or httptools protocol framing the body in chunks; else
    None."""
    cycle = _server(scope, H11Cycle)
    if cycle is not None:
        # h11 chose chunks (an HTTP/1.1 client, no Content-Length).
        if type(getattr(cycle.conn, "_writer", None)) is not ChunkedWriter:
            return None
    else:
        cycle = _server(scope, HttptoolsCycle)
        if cycle is None or getattr(cycle, "chunked_encoding", None) is not True:
            return None
    if not _has(cycle, CYCLE_FIELDS) or not _has(cycle.flow, FLOW_FIELDS):
        return None
    if scope.get("method") == "HEAD" or not cycle.response_started:
        return None
    transport, flow = cycle.transport, cycle.flow

    def write(data: bytes) -> bool:
        # An empty chunk would end the body: that is the ASGI send's to do.
        if not data or flow.write_paused or cycle.disconnected or cycle.response_complete:
            return False
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        return True

    return write


def connection_dropper(scope: Scope) -> Callable[[], None] | None:
    """Drops the connection of this request or WebSocket at once, if the server is one of
    uvicorn's protocols: for a client that stopped reading, whose buffered bytes would
    otherwise keep the connection — a close frame, or uvicorn's own close, waits behind
    them for good (and uvicorn would log an unfinished response as an error of the
    app's)."""
    owner = _server(scope, H11Cycle) or _server(scope, HttptoolsCycle) or _websocket(scope)
    transport = getattr(owner, "transport", None)
    abort = getattr(transport, "abort", None)
    return abort if callable(abort) else None


def message_writer(scope: Scope) -> Writer | None:
    """A writer of text messages (str) to the WebSocket this scope accepted, if the
    server is uvicorn's websockets protocol; else None."""
    protocol = _server(scope, WebSocketsSansIOProtocol)
    if protocol is None or not _has(protocol, PROTOCOL_FIELDS):
        return None
    if not _has(protocol.conn, CONNECTION_FIELDS) or not protocol.handshake_complete:
        return None
    transport, conn, writable = protocol.transport, protocol.conn, protocol.writable
    # Compression negotiated: a big message (a burst as lines, a replay) is worth its
    # deflate, a token's frame is not.
    largest = COMPRESS_ABOVE if conn.extensions else math.inf

    def write(text: str) -> bool:
        if (
            len(text) > largest
            or not writable.is_set()
            or protocol.close_sent
            or protocol.disconnected
            or conn.state is not State.OPEN
            or conn.expect_continuation_frame
        ):
            return False
        transport.write(text_frame(text.encode()))
        return True

    return write


def text_frame(data: bytes) -> bytes:
    """A whole text message from the server, as one frame: FIN and the text opcode, the
    length in 7, 16 or 64 bits, no mask (RFC 6455, 5.2)."""
    size = len(data)
    if size < 126:
        return bytes((0x81, size)) + data
    if size < 1 << 16:
        return b"\x81\x7e" + size.to_bytes(2, "big") + data
    return b"\x81\x7f" + size.to_bytes(8, "big") + data
