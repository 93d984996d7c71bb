"""The load generator: raw asyncio protocols that open streams and check every delta.

Each worker keeps its connection from one stream to the next, as users' clients do: a
browser keeps its HTTP/1.1 connections alive between requests, and a page's WebSocket
serves all its runs (`keep=False`, the bench's `--connections fresh`, opens one per
stream instead, handshake and all). An SSE stream is read through HTTP/1.1 chunked
encoding; a WebSocket through its own small frame parser (server frames are never
masked). Every
event is parsed as JSON and checked: the deltas are "w0 ", "w1 ", … in order, a `seq`
grows by one, a closing frame's `text` (where there is one) is the whole reply, and the
stream ends cleanly. Anything else is a failure, with its reason.

Raw protocols rather than an HTTP client library: the generator must stay far from its
own core's limit, or it would measure itself. It reports its CPU so that shows.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic_core import from_json

from bench.servers import delta, expected_text, work_text

__all__ = ["Connection", "Result", "Target", "open_idle", "run_cell"]

DELTA_TYPES = frozenset({"token", "text-delta"})
#: Frame types that close a stream (thinwire, bare, sse-starlette; the AI SDK's `finish`).
CLOSING_TYPES = frozenset({"done", "finish"})
#: thinwire's heartbeat over a WebSocket (an SSE one is a comment).
HEARTBEAT = b'{"type":"heartbeat"}'


@dataclass(frozen=True)
class Target:
    """How to ask a server for one stream of `deltas` deltas, handed over at `pace`."""

    name: str
    port: int
    path: str
    #: "sse" or "ws"
    transport: str = "sse"
    #: The request body: {deltas} and {pace} are replaced by the work, {text} by the
    #: message asking thinwire's `deltas` agent for it.
    body: str = '{{"deltas": {deltas}, "pace": "{pace}"}}'

    def request(self, deltas: int, pace: str = "burst") -> bytes:
        text = work_text(deltas, pace)
        body = self.body.format(deltas=deltas, pace=pace, text=text).encode()
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            "Content-Type: application/json\r\nAccept: text/event-stream\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


@dataclass
class Result:
    ok: bool
    deltas: int = 0
    #: Seconds from connecting to the first delta, and to the end of the stream.
    first_delta: float = 0.0
    total: float = 0.0
    error: str = ""
    heartbeats: int = 0


@cache
def expected_deltas(count: int) -> tuple[str, ...]:
    return tuple(delta(i) for i in range(count))


@dataclass
class Checker:
    """Checks the events of one stream as they come."""

    deltas: int
    started: float
    next_delta: int = 0
    last_seq: int | None = None
    closed: bool = False
    first_delta: float = 0.0
    error: str = ""
    heartbeats: int = 0
    events: int = 0
    #: Set when the first event arrives (the idle streams wait for it).
    on_event: Callable[[], None] | None = None
    expected: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.expected = expected_deltas(self.deltas)

    def event(self, data: bytes) -> None:
        self.events += 1
        if self.on_event is not None:
            self.on_event()
        if data == b"[DONE]":  # the AI SDK's end marker
            return
        frame: dict[str, Any] = from_json(data)
        seq = frame.get("seq")
        if seq is not None:
            if self.last_seq is not None and seq != self.last_seq + 1:
                self.fail(f"seq {seq} after {self.last_seq}")
            self.last_seq = seq
        kind = frame.get("type")
        if kind in DELTA_TYPES:
            index = self.next_delta
            if self.closed:
                self.fail("a delta after the closing frame")
            if index >= len(self.expected) or frame["delta"] != self.expected[index]:
                self.fail(f"delta {frame['delta']!r} where w{index} was due")
            if index == 0:
                self.first_delta = time.perf_counter()
            self.next_delta = index + 1
        elif kind in CLOSING_TYPES:
            self.closed = True
            text = frame.get("text")
            if text is not None and text != expected_text(self.deltas):
                self.fail("the closing frame's text is not the deltas joined")
            if kind == "done" and frame.get("stopReason", "end") != "end":
                self.fail(f"stop reason {frame.get('stopReason')}")

    def beat(self) -> None:
        self.heartbeats += 1
        if self.on_event is not None:
            self.on_event()

    def fail(self, reason: str) -> None:
        if not self.error:
            self.error = reason

    def result(self, ended_cleanly: bool, reason: str = "") -> Result:
        now = time.perf_counter()
        error = self.error or reason
        if not error and not ended_cleanly:
            error = "the stream ended early"
        if not error and self.next_delta != self.deltas:
            error = f"{self.next_delta} of {self.deltas} deltas"
        if not error and not self.closed:
            error = "no closing frame"
        return Result(
            ok=not error,
            deltas=self.next_delta,
            first_delta=(self.first_delta or now) - self.started,
            total=now - self.started,
            error=error,
            heartbeats=self.heartbeats,
        )


class SseProtocol(asyncio.Protocol):
    """HTTP/1.1 responses, chunked bodies, SSE events -> a Checker per request. The
    connection is kept for the next request unless the server says it closes it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.checker: Checker | None = None
        self.done: asyncio.Future[Result] | None = None
        self.reusable = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.reusable = True

    def begin(self, request: bytes, checker: Checker, done: asyncio.Future[Result]) -> None:
        assert self.transport is not None and self.reusable
        self.checker = checker
        self.done = done
        self.head = b""
        self.in_body = False
        self.chunked = False
        self.raw = bytearray()  # body bytes not yet de-chunked
        self.sse = b""  # de-chunked bytes not yet split into events
        self.ended = False
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        if self.checker is None or self.ended:
            return  # nothing asked for: not expected, and not ours to check
        try:
            if not self.in_body:
                self.head += data
                end = self.head.find(b"\r\n\r\n")
                if end < 0:
                    return
                head, data = self.head[:end], self.head[end + 4 :]
                self.in_body = True
                status = head.split(b" ", 2)[1]
                if status != b"200":
                    self.finish(False, f"HTTP {status.decode()}")
                    return
                lowered = head.lower()
                self.chunked = b"transfer-encoding: chunked" in lowered
                if not self.chunked or b"connection: close" in lowered:
                    self.reusable = False
            if self.chunked:
                self.dechunk(data)
            else:
                self.text(data)
        except Exception as exc:  # a malformed stream is a failure, not a crash
            self.finish(False, f"{type(exc).__name__}: {exc}")

    def dechunk(self, data: bytes) -> None:
        raw = self.raw
        raw += data
        position = 0
        pieces = []
        while True:
            line_end = raw.find(b"\r\n", position)
            if line_end < 0:
                break
            size = int(raw[position:line_end], 16)
            start = line_end + 2
            if size == 0:
                if len(raw) < start + 2:
                    break  # the CRLF that ends the body is still to come
                self.ended = True
                break
            if len(raw) < start + size + 2:
                break
            pieces.append(bytes(raw[start : start + size]))
            position = start + size + 2
        del raw[:position]
        if pieces:
            self.text(b"".join(pieces))
        if self.ended:
            self.finish(True)

    def text(self, data: bytes) -> None:
        if b"\r" in data:  # sse-starlette separates lines with CRLF
            data = data.replace(b"\r\n", b"\n")
        blocks = (self.sse + data).split(b"\n\n")
        self.sse = blocks.pop()
        checker = self.checker
        assert checker is not None
        for block in blocks:
            if block.startswith(b":"):
                checker.beat()
                continue
            start = block.find(b"data: ")
            if start < 0:  # e.g. `retry:` alone
                continue
            end = block.find(b"\n", start)
            checker.event(block[start + 6 : end if end >= 0 else len(block)])

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        if self.checker is not None:
            ended = self.ended
            self.finish(ended, "" if ended else f"connection lost ({exc})")

    def finish(self, cleanly: bool, reason: str = "") -> None:
        if self.done is not None and not self.done.done():
            assert self.checker is not None
            self.done.set_result(self.checker.result(cleanly, reason))
        if not cleanly:
            self.close()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


class WsProtocol(asyncio.Protocol):
    """A WebSocket client: handshake, then a `send` command per stream, text frames -> a
    Checker. It offers `thinwire.v1.lines` first, as the client package does: a message
    may hold several frames, one per line. One socket serves a worker's streams one after
    the other, as a page's socket serves its runs."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.transport: asyncio.Transport | None = None
        self.checker: Checker | None = None
        self.done: asyncio.Future[Result] | None = None
        self.command = b""  # a `send` waiting for the handshake
        self.buffer = b""
        self.open = False
        self.reusable = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.reusable = True
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            (
                f"GET {self.target.path} HTTP/1.1\r\nHost: 127.0.0.1:{self.target.port}\r\n"
                "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Protocol: thinwire.v1.lines, thinwire.v1\r\n\r\n"
            ).encode()
        )

    def begin(self, deltas: int, pace: str, checker: Checker, done: asyncio.Future[Result]) -> None:
        assert self.reusable
        self.checker = checker
        self.done = done
        text = work_text(deltas, pace)
        self.command = json.dumps({"type": "send", "message": {"text": text}}).encode()
        if self.open:
            self.send_command()

    def send_command(self) -> None:
        command, self.command = self.command, b""
        if command:
            self.send_frame(0x1, command)

    def send_frame(self, opcode: int, payload: bytes) -> None:
        assert self.transport is not None and len(payload) < 126
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.transport.write(bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + masked)

    def data_received(self, data: bytes) -> None:
        try:
            self.buffer += data
            if not self.open:
                end = self.buffer.find(b"\r\n\r\n")
                if end < 0:
                    return
                status = self.buffer.split(b" ", 2)[1]
                if status != b"101":
                    self.finish(False, f"HTTP {status.decode()}")
                    return
                self.buffer = self.buffer[end + 4 :]
                self.open = True
                self.send_command()
            self.frames()
        except Exception as exc:
            self.finish(False, f"{type(exc).__name__}: {exc}")

    def frames(self) -> None:
        buffer = self.buffer
        position = 0
        while len(buffer) - position >= 2:
            opcode = buffer[position] & 0x0F
            length = buffer[position + 1] & 0x7F
            start = position + 2
            if length == 126:
                if len(buffer) - position < 4:
                    break
                length = int.from_bytes(buffer[start : start + 2], "big")
                start += 2
            elif length == 127:
                if len(buffer) - position < 10:
                    break
                length = int.from_bytes(buffer[start : start + 8], "big")
                start += 8
            if len(buffer) < start + length:
                break
            payload = buffer[start : start + length]
            position = start + length
            if opcode == 0x1:
                checker = self.checker
                if checker is None or checker.closed:
                    continue  # nothing asked for: not ours to check
                for line in payload.split(b"\n"):
                    if line == HEARTBEAT:
                        checker.beat()
                    else:
                        checker.event(line)
                if checker.closed:
                    self.finish(True)
            elif opcode == 0x8:
                self.finish(False, "the server closed the socket")
                return
            elif opcode == 0x9:
                self.send_frame(0xA, payload)
        self.buffer = buffer[position:]

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.finish(False, f"connection lost ({exc})")

    def finish(self, cleanly: bool, reason: str = "") -> None:
        if self.done is not None and not self.done.done():
            assert self.checker is not None
            self.done.set_result(self.checker.result(cleanly, reason))
        if not cleanly:
            self.close()

    def close(self) -> None:
        self.reusable = False
        if self.transport is not None and not self.transport.is_closing():
            if self.open:
                self.send_frame(0x8, (1000).to_bytes(2, "big"))
            self.transport.close()


class Connection:
    """A worker's connection to the target, kept from one stream to the next (`keep`), as
    a browser keeps its HTTP connections and a page its socket; or opened afresh for each
    stream. A failed stream drops it."""

    def __init__(self, target: Target, keep: bool = True) -> None:
        self.target = target
        self.keep = keep
        self.protocol: SseProtocol | WsProtocol | None = None

    async def stream(self, deltas: int, pace: str = "burst", timeout: float = 60.0) -> Result:
        """Ask for one stream, read it to its end and check it."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Result] = loop.create_future()
        checker = Checker(deltas, time.perf_counter())
        protocol = self.protocol
        if protocol is None or not protocol.reusable:
            self.close()
            fresh: SseProtocol | WsProtocol = (
                WsProtocol(self.target) if self.target.transport == "ws" else SseProtocol()
            )
            try:
                await loop.create_connection(lambda: fresh, "127.0.0.1", self.target.port)
            except OSError as exc:
                return Result(ok=False, error=f"connect: {exc}")
            self.protocol = protocol = fresh
        if isinstance(protocol, WsProtocol):
            protocol.begin(deltas, pace, checker, done)
        else:
            protocol.begin(self.target.request(deltas, pace), checker, done)
        try:
            result = await asyncio.wait_for(done, timeout)
        except TimeoutError:
            result = checker.result(False, f"timed out after {timeout:.0f} s")
        if not result.ok or not self.keep:
            self.close()
        return result

    def close(self) -> None:
        if self.protocol is not None:
            self.protocol.close()
            self.protocol = None


async def run_cell(
    target: Target,
    concurrency: int,
    streams: int,
    deltas: int,
    budget: float,
    pace: str = "burst",
    stagger: float = 0.0,
    keep: bool = True,
) -> tuple[list[Result], float]:
    """`concurrency` workers open `streams` streams in all, one after the other each, on
    a connection each keeps (`keep`) or one per stream; none is started after `budget`
    seconds. With `stagger`, the workers' first streams start spread over that many
    seconds rather than at once, and only a failure of a first stream is kept: the load
    was still ramping up. Returns the results and the wall time."""
    ramp = set(range(concurrency)) if stagger else set()
    started = 0
    results: list[Result] = []
    deadline = time.perf_counter() + budget

    async def worker(index: int) -> None:
        nonlocal started
        if stagger:
            await asyncio.sleep(stagger * index / concurrency)
        connection = Connection(target, keep)
        try:
            while started < streams and time.perf_counter() < deadline:
                started += 1
                result = await connection.stream(deltas, pace)
                if index in ramp:  # a worker's first stream runs while the load ramps up
                    ramp.discard(index)
                    if result.ok:
                        continue
                results.append(result)
        finally:
            connection.close()

    begin = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return results, time.perf_counter() - begin


async def open_idle(target: Target, count: int, batch: int = 100) -> list[IdleStream]:
    """Open `count` streams that stay open; returns once each has sent its first event."""
    streams: list[IdleStream] = []
    for first in range(0, count, batch):
        opened = await asyncio.gather(
            *(IdleStream.open(target) for _ in range(first, min(count, first + batch)))
        )
        streams.extend(opened)
    return streams


class IdleStream:
    """A stream held open: it counts heartbeats until closed."""

    def __init__(self, checker: Checker, protocol: SseProtocol) -> None:
        self.checker = checker
        self.protocol = protocol

    @classmethod
    async def open(cls, target: Target) -> IdleStream:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Result] = loop.create_future()
        first: asyncio.Future[None] = loop.create_future()
        checker = Checker(0, time.perf_counter())
        checker.on_event = lambda: first.done() or first.set_result(None)
        protocol = SseProtocol()
        await loop.create_connection(lambda: protocol, "127.0.0.1", target.port)
        protocol.begin(target.request(0), checker, done)
        await asyncio.wait_for(asyncio.wait([first, done], return_when="FIRST_COMPLETED"), 30)
        if done.done():
            raise RuntimeError(f"an idle stream ended: {done.result().error}")
        return cls(checker, protocol)

    @property
    def heartbeats(self) -> int:
        return self.checker.heartbeats

    def close(self) -> None:
        self.protocol.close()
