"""Server-sent events: the encoding of frames and the streaming response that carries them."""

from __future__ import annotations

from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse

from thinwire import wire
from thinwire.runs import RunLog

__all__ = ["SSE_HEADERS", "encode", "sse_response"]

SSE_HEADERS = {
    "Cache-Control": "no-store",
    # Tell nginx-style proxies not to buffer the stream.
    "X-Accel-Buffering": "no",
    wire.PROTOCOL_HEADER: wire.PROTOCOL_VERSION,
}
HEARTBEAT = b": heartbeat\n\n"


def encode(seq: int, data: str) -> bytes:
    """One SSE event. `data` is compact JSON, so it never contains a newline."""
    return f"id: {seq}\ndata: {data}\n\n".encode()


async def frames(log: RunLog, after: int, heartbeat: float | None) -> AsyncIterator[bytes]:
    async for item in log.follow(after, heartbeat):
        yield HEARTBEAT if item is None else encode(*item)


def sse_response(log: RunLog, *, after: int = 0, heartbeat: float | None) -> StreamingResponse:
    return StreamingResponse(
        frames(log, after, heartbeat), media_type="text/event-stream", headers=SSE_HEADERS
    )
