"""A stream's chunks written straight to uvicorn's connection (thinwire.direct), against
uvicorn's HTTP/1.1 protocol as `thinwire serve` runs it, in a thread of this process."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from conftest import app_for, parse_sse
from thinwire import Agent, Run, direct, mount, sse, websocket, wire
from thinwire.direct import (
    COMPRESS_ABOVE,
    SERVER_SEND,
    Writer,
    chunk_writer,
    message_writer,
    text_frame,
)
from thinwire.serving import protocol_with
from thinwire.testing.server import free_port

CHUNKS = [b"first", b"x" * 70_000, b"third"]


@contextmanager
def uvicorn_serving(app: ASGIApp, http: str = "h11") -> Iterator[int]:
    """`app` under uvicorn, with its h11 protocol as `thinwire serve` runs it (or another
    one, as `uvicorn[standard]` picks httptools): its port."""
    port = free_port()
    protocol = protocol_with(10.0) if http == "h11" else http
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", http=protocol)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            threading.Event().wait(0.01)
        else:
            raise RuntimeError("uvicorn did not start")
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


def read_response(sock: socket.socket, buffered: bytes = b"") -> tuple[bytes, bytes, bytes]:
    """One HTTP/1.1 response off a kept-alive connection: (head, raw body, what follows)."""
    data = buffered
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, data = data.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        while chunk := sock.recv(65536):  # close-delimited
            data += chunk
        return head, data, b""
    while b"0\r\n\r\n" not in data:
        data += sock.recv(65536)
    end = data.index(b"0\r\n\r\n") + 5
    return head, data[:end], data[end:]


def dechunk(raw: bytes) -> list[bytes]:
    chunks = []
    while True:
        size_line, _, raw = raw.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return chunks
        chunks.append(raw[:size])
        assert raw[size : size + 2] == b"\r\n"
        raw = raw[size + 2 :]


def chunk_app(seen: list[bool], headers: list[tuple[bytes, bytes]] | None = None) -> ASGIApp:
    """Starts a response, writes CHUNKS directly where it can (else sends them), ends it;
    records whether it could."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        scope[SERVER_SEND] = send
        await send({"type": "http.response.start", "status": 200, "headers": headers or []})
        write = chunk_writer(scope)
        seen.append(write is not None)
        for chunk in CHUNKS:
            if write is None or not write(chunk):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_chunks_written_directly_frame_as_uvicorn_would_and_keep_the_connection(
    http: str,
) -> None:
    seen: list[bool] = []
    with (
        uvicorn_serving(chunk_app(seen), http) as port,
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        sock.sendall(request + request)  # two requests on one kept-alive connection
        head, raw, rest = read_response(sock)
        head2, raw2, _ = read_response(sock, rest)
    assert seen == [True, True]
    assert head.startswith(b"HTTP/1.1 200") and head2.startswith(b"HTTP/1.1 200")
    assert raw.startswith(b"5\r\nfirst\r\n") and raw.endswith(b"5\r\nthird\r\n0\r\n\r\n")
    assert dechunk(raw) == CHUNKS and dechunk(raw2) == CHUNKS


def test_an_http_1_0_client_gets_every_chunk_the_asgi_way() -> None:
    seen: list[bool] = []
    with (
        uvicorn_serving(chunk_app(seen)) as port,
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        sock.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
        head, body, _ = read_response(sock)
    assert seen == [False]  # h11 delimits the body by closing: no chunks to write
    assert head.startswith(b"HTTP/1.1 200") and body == b"".join(CHUNKS)


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_a_body_of_a_given_length_is_sent_the_asgi_way(http: str) -> None:
    seen: list[bool] = []
    length = [(b"content-length", str(sum(map(len, CHUNKS))).encode())]
    with (
        uvicorn_serving(chunk_app(seen, length), http) as port,
        socket.create_connection(("127.0.0.1", port)) as sock,
    ):
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        head, body, _ = read_response(sock)
    assert seen == [False]
    assert b"transfer-encoding" not in head.lower() and body == b"".join(CHUNKS)


def test_only_uvicorns_own_send_is_written_past() -> None:
    async def wrapped(message: Message) -> None:
        raise AssertionError("not called")

    assert chunk_writer({"type": "http", "method": "POST"}) is None
    assert chunk_writer({"type": "http", "method": "POST", SERVER_SEND: wrapped}) is None


class FakeWriter:
    """Stands for h11's chunked body writer."""


class FakeCycle:
    """Stands for uvicorn's per-request object, with what a chunk writer reads of it."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.conn = SimpleNamespace(_writer=FakeWriter())
        self.response_started = True
        self.transport = SimpleNamespace(write=self.written.append)
        self.flow = SimpleNamespace(write_paused=False)
        self.disconnected = False
        self.response_complete = False

    async def send(self, message: Message) -> None:
        raise AssertionError("not called")


class FakeProtocol:
    """Stands for uvicorn's websockets-sansio protocol, with what a message writer reads."""

    def __init__(self) -> None:
        self.handshake_complete = True
        self.transport = SimpleNamespace(write=lambda data: None)
        self.conn = SimpleNamespace(extensions=[], state="open", expect_continuation_frame=False)
        self.writable = asyncio.Event()
        self.close_sent = False
        self.disconnected = False

    async def send(self, message: Message) -> None:
        raise AssertionError("not called")


@pytest.mark.parametrize("field", ["flow", "response_complete", "flow.write_paused"])
def test_a_uvicorn_without_a_field_a_chunk_writer_reads_is_sent_to_the_asgi_way(
    monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    monkeypatch.setattr(direct, "H11Cycle", FakeCycle)
    monkeypatch.setattr(direct, "ChunkedWriter", FakeWriter)
    cycle = FakeCycle()
    scope: Scope = {"type": "http", "method": "POST", SERVER_SEND: cycle.send}
    write = chunk_writer(scope)
    assert write is not None and write(b"abc")  # all there: written directly
    assert cycle.written == [b"3\r\nabc\r\n"]
    owner, _, name = field.rpartition(".")
    delattr(getattr(cycle, owner) if owner else cycle, name)
    assert chunk_writer(scope) is None


@pytest.mark.parametrize("field", ["close_sent", "conn.expect_continuation_frame"])
def test_a_uvicorn_without_a_field_a_message_writer_reads_is_sent_to_the_asgi_way(
    monkeypatch: pytest.MonkeyPatch, field: str
) -> None:
    monkeypatch.setattr(direct, "WebSocketsSansIOProtocol", FakeProtocol)
    monkeypatch.setattr(direct, "State", SimpleNamespace(OPEN="open"))
    protocol = FakeProtocol()
    protocol.writable.set()
    scope: Scope = {"type": "websocket", SERVER_SEND: protocol.send}
    write = message_writer(scope)
    assert write is not None and write("abc")
    owner, _, name = field.rpartition(".")
    delattr(getattr(protocol, owner) if owner else protocol, name)
    assert message_writer(scope) is None


def test_the_request_lets_go_of_the_servers_send_when_it_ends() -> None:
    """uvicorn's send is a method of its object for the request, which holds the scope:
    a scope that kept the send would make the two a cycle, left to the collector."""

    class Cycle:  # as uvicorn's RequestResponseCycle holds its scope and sends
        def __init__(self) -> None:
            self.scope: Scope = {
                "type": "http",
                "asgi": {"version": "3.0"},
                "http_version": "1.1",
                "method": "GET",
                "scheme": "http",
                "path": "/healthz",
                "raw_path": b"/healthz",
                "query_string": b"",
                "root_path": "",
                "headers": [(b"host", b"127.0.0.1")],
                "client": ("127.0.0.1", 1),
                "server": ("127.0.0.1", 80),
            }
            self.sent: list[Message] = []
            self.seen: Callable[..., Any] | None = None

        async def receive(self) -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(self, message: Message) -> None:
            self.seen = self.seen or self.scope.get(SERVER_SEND)
            self.sent.append(message)

    cycle = Cycle()
    asyncio.run(app_for({"ticker": Ticker})(cycle.scope, cycle.receive, cycle.send))
    assert cycle.sent[0]["status"] == 200
    assert cycle.seen == cycle.send  # it was there while the request ran
    assert SERVER_SEND not in cycle.scope


class Ticker(Agent):
    """Says 40 deltas, a loop tick apart: most are written one by one, as they come. Told
    "big", deltas of every size a WebSocket frame's length is written in."""

    async def run(self, run: Run, text: str) -> None:
        deltas = BIG if text == "big" else [f"{i}," for i in range(40)]
        for delta in deltas:
            await run.say(delta)
            await asyncio.sleep(0)


BIG = ["a", "b" * 200, "c" * 70_000, "d"]


@pytest.fixture
def direct_writes(monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The sizes of the chunks or messages written directly: a list per stream or socket
    that could write directly."""
    writers: list[list[int]] = []

    def recording_with(make: Callable[[Scope], Writer | None]) -> Callable[[Scope], Writer | None]:
        def recording(scope: Scope) -> Writer | None:
            write = make(scope)
            if write is None:
                return None
            sizes: list[int] = []
            writers.append(sizes)

            def recorded(data: Any) -> bool:
                written = write(data)
                if written:
                    sizes.append(len(data))
                return written

            return recorded

        return recording

    monkeypatch.setattr(sse, "chunk_writer", recording_with(chunk_writer))
    monkeypatch.setattr(websocket, "message_writer", recording_with(message_writer))
    return writers


def sse_over_http(port: int, request: bytes) -> tuple[list[dict[str, Any]], bytes]:
    """The frames of an SSE response, and its whole body, over HTTP/1.1."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        head, raw, _ = read_response(sock)
    assert head.startswith(b"HTTP/1.1 200")
    body = b"".join(dechunk(raw))
    return parse_sse(body.decode()), body


def run_over_http(port: int) -> tuple[list[dict[str, Any]], bytes]:
    body = json.dumps({"message": {"text": "go"}}).encode()
    return sse_over_http(
        port,
        b"POST /agents/ticker/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
    )


@pytest.mark.parametrize("http", ["h11", "httptools"])
def test_a_thinwire_stream_writes_its_chunks_directly(
    direct_writes: list[list[int]], http: str
) -> None:
    with uvicorn_serving(app_for({"ticker": Ticker}), http) as port:
        frames, _ = run_over_http(port)
        # A finished run's frames, read back from the store, are written the same way.
        path = f"/agents/ticker/contexts/{frames[0]['contextId']}/events?after=0"
        replayed, _ = sse_over_http(port, b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    text = "".join(f["delta"] for f in frames if f["type"] == "token")
    assert text == "".join(f"{i}," for i in range(40)) and frames[-1]["type"] == "done"
    assert replayed == frames
    assert len(direct_writes) == 2 and all(direct_writes)


def test_a_mounted_app_sends_every_chunk_the_asgi_way(direct_writes: list[list[int]]) -> None:
    parent = Starlette()
    mount(parent, "/api", app_for({"ticker": Ticker}))
    body = json.dumps({"message": {"text": "go"}}).encode()
    with uvicorn_serving(parent) as port:
        frames, _ = sse_over_http(
            port,
            b"POST /api/agents/ticker/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body),
        )
    assert frames[-1]["type"] == "done"
    assert direct_writes == []  # the parent's middleware stands between


class BodyCounter:
    """A user's middleware that looks at every body message."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.body = b""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counting(message: Message) -> None:
            if message["type"] == "http.response.body":
                self.body += message["body"]
            await send(message)

        await self.app(scope, receive, counting)


def test_middleware_added_to_the_app_sees_every_chunk(direct_writes: list[list[int]]) -> None:
    app = app_for({"ticker": Ticker})
    app.add_middleware(BodyCounter)
    with uvicorn_serving(app) as port:
        frames, body = run_over_http(port)
    assert frames[-1]["type"] == "done"
    assert direct_writes == []  # nothing went past the user's middleware
    counter = app.middleware_stack
    while not isinstance(counter, BodyCounter):
        counter = counter.app  # type: ignore[union-attr]
    assert counter.body == body


def frames_of_run(socket: ClientConnection, text: str) -> list[dict[str, Any]]:
    socket.send(json.dumps({"type": "send", "message": {"text": text}}))
    frames = [json.loads(socket.recv(timeout=10))]
    while frames[-1]["type"] != "done":
        frames.append(json.loads(socket.recv(timeout=10)))
    return frames


def test_a_websocket_writes_its_messages_directly(direct_writes: list[list[int]]) -> None:
    with uvicorn_serving(app_for({"ticker": Ticker})) as port:
        url = f"ws://127.0.0.1:{port}/agents/ticker/ws"
        subprotocols = [Subprotocol(wire.WEBSOCKET_SUBPROTOCOL)]
        with connect(url, subprotocols=subprotocols) as socket:  # compressed, if it can be
            assert "permessage-deflate" in socket.response.headers["Sec-WebSocket-Extensions"]
            ticks = frames_of_run(socket, "go")
            # A rejection is sent the ASGI way, compressed: it decodes after direct ones.
            unknown = {"type": "attach", "contextId": "ctx-" + "0" * 36}
            socket.send(json.dumps(unknown))
            rejected = json.loads(socket.recv(timeout=10))
            big = frames_of_run(socket, "big")
    assert "".join(f["delta"] for f in ticks if f["type"] == "token") == "".join(
        f"{i}," for i in range(40)
    )
    assert rejected["type"] == "rejected" and rejected["code"] == "context_not_found"
    assert [f["delta"] for f in big if f["type"] == "token"] == BIG
    assert len(direct_writes) == 1 and len(direct_writes[0]) > len(BIG)


@pytest.mark.parametrize("size", [0, 1, 125, 126, 65_535, 65_536, 70_000])
def test_a_text_frame_is_framed_as_the_websockets_library_frames_it(size: int) -> None:
    data = ("é" * size).encode()[:size]
    assert text_frame(data) == Frame(Opcode.TEXT, data).serialize(mask=False, extensions=[])


@pytest.mark.parametrize("compression", ["deflate", None])
def test_a_big_message_is_left_to_compression_where_the_client_takes_it(
    direct_writes: list[list[int]], compression: str | None
) -> None:
    with uvicorn_serving(app_for({"ticker": Ticker})) as port:
        url = f"ws://127.0.0.1:{port}/agents/ticker/ws"
        subprotocols = [Subprotocol(wire.WEBSOCKET_SUBPROTOCOL)]
        with connect(url, subprotocols=subprotocols, compression=compression) as socket:
            big = frames_of_run(socket, "big")
    assert [f["delta"] for f in big if f["type"] == "token"] == BIG
    (sizes,) = direct_writes
    assert sizes  # the small ones are written directly either way
    assert (max(sizes) > COMPRESS_ABOVE) is (compression is None)
