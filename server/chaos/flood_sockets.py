"""Raw connections for a flood, hundreds at a time on one event loop: ones that send a
request's headers a byte at a time, ones that send nothing, and SSE followers that read
only the response's head. Each notes when the server closed it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable

__all__ = ["Connection", "close_all", "open_many", "status_of"]

#: Bytes of a response kept: enough for its status line.
HEAD = 1024


class Connection(asyncio.Protocol):
    def __init__(self, first: bytes) -> None:
        self.first = first
        self.transport: asyncio.Transport | None = None
        self.head = bytearray()
        self.opened_at = time.monotonic()
        self.closed_at: float | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        if self.first:
            transport.write(self.first)

    def data_received(self, data: bytes) -> None:
        if len(self.head) < HEAD:
            self.head += data[: HEAD - len(self.head)]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed_at = time.monotonic()

    @property
    def open(self) -> bool:
        return self.closed_at is None

    def drip(self, byte: bytes = b"a") -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(byte)


def status_of(connection: Connection) -> int | None:
    """The response's status code, once its status line arrived."""
    line = bytes(connection.head).split(b"\r\n", 1)[0].split(b" ")
    if len(line) >= 2 and line[0].startswith(b"HTTP/") and line[1].isdigit():
        return int(line[1])
    return None


async def open_many(
    port: int, count: int, first: bytes, *, batch: int = 100, timeout: float = 10.0
) -> tuple[list[Connection], int]:
    """`count` connections to 127.0.0.1:`port`, each sending `first` at once; the ones
    that opened and how many did not."""
    loop = asyncio.get_running_loop()

    async def one() -> Connection | None:
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: Connection(first), "127.0.0.1", port), timeout
            )
        except (OSError, TimeoutError):
            return None
        return protocol

    opened: list[Connection] = []
    for start in range(0, count, batch):
        results = await asyncio.gather(*(one() for _ in range(min(batch, count - start))))
        opened += [c for c in results if c is not None]
    return opened, count - len(opened)


async def close_all(connections: Iterable[Connection]) -> None:
    """Close every connection and let the loop see them go."""
    for connection in connections:
        if connection.transport is not None:
            with contextlib.suppress(Exception):
                connection.transport.abort()
    await asyncio.sleep(0)  # connection_lost runs on the next turn of the loop
