"""Server-sent events: the encoding of frames and the response that streams them.

The response races two tasks: one writes frames, one listens for the client leaving;
whichever ends first ends the other (plain asyncio tasks: an anyio task group cost more
per stream than a model's tokens do). Closing the stream never touches the run.

A live run's log is pumped (`Follower.pump`): its frames are written as they come,
without the writer task waking per frame, and heartbeats and the write timeout come from
one periodic check per event loop rather than a timer per write (see `runlog.py`). Under
`thinwire serve`, the body's chunks are written to the connection directly, past the
middleware and h11 (`direct.py`).

A client that stops reading cannot make the server buffer for it: frames are read from
the run's log, not queued per client, and each write must complete within
`send_timeout`, or the slow consumer is disconnected. It can reattach from the log with
`Last-Event-ID` and lose nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from thinwire import wire
from thinwire.direct import chunk_writer, connection_dropper
from thinwire.metrics import METRICS
from thinwire.runlog import Batch, Follower, FrameSource

__all__ = ["SSE_HEADERS", "EventStream", "encode", "encode_all"]

logger = logging.getLogger("thinwire.sse")

SSE_HEADERS = {
    # no-transform: a proxy that compresses what passes (Next.js's rewrites, a CDN) would
    # otherwise hold the frames back until its compressor fills, often the stream's end.
    "Cache-Control": "no-store, no-transform",
    # Tell nginx-style proxies not to buffer the stream.
    "X-Accel-Buffering": "no",
    wire.PROTOCOL_HEADER: wire.PROTOCOL_VERSION,
}
HEARTBEAT = b": heartbeat\n\n"


def encode(seq: int, data: str) -> bytes:
    """One SSE event. `data` is compact JSON, so it never contains a newline."""
    return f"id: {seq}\ndata: {data}\n\n".encode()


def encode_all(frames: Sequence[tuple[int, str]]) -> bytes:
    """Several SSE events, as one body."""
    if len(frames) == 1:  # a model's token per tick: the common case
        return encode(*frames[0])
    return "".join([f"id: {seq}\ndata: {data}\n\n" for seq, data in frames]).encode()


class EventStream(Response):
    """A response streaming the frames of a source as SSE, a batch per write."""

    def __init__(
        self,
        frames: FrameSource,
        *,
        send_timeout: float,
        retry_ms: int | None = None,
        on_close: Callable[[], None] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        # As StreamingResponse does: no body, so no content-length.
        self.status_code = 200
        self.media_type = "text/event-stream"
        self.background = None
        self.init_headers({**SSE_HEADERS, **(headers or {})})
        self.frames = frames
        self.send_timeout = send_timeout
        self.retry_ms = retry_ms
        #: Called once the stream is over, however it ended.
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        direct = chunk_writer(scope)

        async def write(body: bytes, more: bool = True) -> None:
            if more and direct is not None and direct(body):
                return
            # asyncio's own timeout: a fraction of anyio.fail_after's cost.
            async with asyncio.timeout(self.send_timeout):
                await send({"type": "http.response.body", "body": body, "more_body": more})

        def body(batch: Batch | None) -> Awaitable[None] | None:
            data = HEARTBEAT if batch is None else encode_all(batch)
            if direct is not None and direct(data):
                return None
            return send({"type": "http.response.body", "body": data, "more_body": True})

        async def stream() -> None:
            if self.retry_ms is not None:
                await write(f"retry: {self.retry_ms}\n\n".encode())
            if isinstance(self.frames, Follower):
                await self.frames.pump(body, timeout=self.send_timeout)
            else:
                async for batch in self.frames.batches():
                    await write(HEARTBEAT if batch is None else encode_all(batch))
            await write(b"", more=False)

        async def listen(writer: asyncio.Task[None]) -> None:
            try:
                while (await receive())["type"] != "http.disconnect":
                    pass
            finally:
                writer.cancel()  # the client left (or its connection broke): the run goes on

        writer = asyncio.ensure_future(stream())
        listener = asyncio.ensure_future(listen(writer))
        METRICS.stream_opened("sse")
        try:
            await writer
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this response is being cancelled (the server stops), not the writer
        except TimeoutError:
            # The slow consumer goes, the run and its log stay. Ending the app without
            # finishing the body makes any server drop the connection; under uvicorn it is
            # dropped first, so uvicorn sees a client gone, not an app that failed.
            logger.warning("disconnected a client that stopped reading (%s)", scope.get("path"))
            drop = connection_dropper(scope)
            if drop is not None:
                drop()
                await asyncio.sleep(0)  # uvicorn hears of the loss (a callback) before we end
        finally:
            METRICS.stream_closed("sse")
            listener.cancel()
            if self.on_close is not None:
                self.on_close()
