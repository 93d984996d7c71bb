"""The UI message stream response: a run's frames as chunks, over thinwire's own SSE.

The response is thinwire's `EventStream` (its disconnect listener, write timeout and
heartbeats, which the SDK's parser skips as comments) reading a source that translates
each batch of frames into chunks. Each chunk's SSE `id:` is the seq of the frame it came
from, shared by the chunks of one frame; the SDK does not read it (its resume replays
the run from the start). The SDK knows the stream by its header.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from thinwire.aisdk.chunks import Chunks
from thinwire.runlog import Batch, FrameSource
from thinwire.sse import EventStream

__all__ = ["STREAM_HEADER", "ChunkSource", "ui_message_stream"]

#: How the SDK's servers mark a UI message stream, and the protocol version it speaks.
STREAM_HEADER = ("x-vercel-ai-ui-message-stream", "v1")


class ChunkSource:
    """The frames of `frames` as UI message chunks (a FrameSource of chunks)."""

    def __init__(self, frames: FrameSource, chunks: Chunks) -> None:
        self.frames = frames
        self.chunks = chunks

    async def batches(self) -> AsyncIterator[Batch | None]:
        encode = self.chunks.encode
        async for batch in self.frames.batches():
            if batch is None:
                yield None  # a heartbeat
                continue
            out = [(seq, chunk) for seq, data in batch for chunk in encode(json.loads(data))]
            if out:
                yield out


def ui_message_stream(
    frames: FrameSource, chunks: Chunks, *, send_timeout: float, on_close: Callable[[], None]
) -> EventStream:
    response = EventStream(
        ChunkSource(frames, chunks), send_timeout=send_timeout, on_close=on_close
    )
    name, version = STREAM_HEADER
    response.headers[name] = version
    return response
