"""Against a real uvicorn process, started through the `thinwire` CLI."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from conftest import assert_no_canary, parse_sse
from thinwire.codes import CLOSE_CODES, ERROR_CODES, RETRYABLE_CODES
from thinwire.server import CANCEL_GRACE
from thinwire.serving import STREAMS_GRACE
from thinwire.stores.sqlite.database import FORMAT
from thinwire.testing import ServerProcess, free_port, serve

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def gated() -> Iterator[ServerProcess]:
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with serve("serve", "apps:app", env=env) as server:
        yield server


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    data = tmp_path_factory.mktemp("demo")
    with serve("demo", "--delay", "0", "--data-dir", str(data)) as server:
        yield server


def events(response: httpx.Response) -> Iterator[dict[str, Any] | None]:
    """Frames as they arrive; None for each heartbeat comment."""
    block: list[str] = []
    for line in response.iter_lines():
        if line:
            block.append(line)
            continue
        if block and all(part.startswith(":") for part in block):
            yield None
        elif frames := parse_sse("\n".join(block)):  # not a `retry:` line alone
            yield frames[0]
        block = []


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_demo_cli_serves_the_protocol(demo: ServerProcess) -> None:
    with httpx.Client(base_url=demo.url, timeout=10) as client:
        first = parse_sse(client.post("/agents/demo/runs", json={"message": {"text": "hi"}}).text)
        context_id = first[0]["contextId"]
        second = client.post(
            "/agents/demo/runs", json={"contextId": context_id, "message": {"text": "again"}}
        )
        assert "Earlier you told me “hi”" in parse_sse(second.text)[-1]["text"]
        transcript = client.get(f"/agents/demo/contexts/{context_id}")
        assert [t["text"] for t in transcript.json()["turns"][::2]] == ["hi", "again"]
        assert_no_canary(second.text + transcript.text)
        bad = client.post(
            "/agents/demo/runs", content=b"{", headers={"content-type": "application/json"}
        )
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"


def test_frames_stream_before_the_run_ends(gated: ServerProcess) -> None:
    with httpx.Client(base_url=gated.url, timeout=10) as client:
        body = {"message": {"text": "hi"}}
        with client.stream("POST", "/agents/gated/runs", json=body) as response:
            stream = events(response)
            start = next(stream)
            token = next(stream)
            # The first token arrived while the agent is still held at the gate.
            assert start is not None and start["type"] == "run_start"
            assert token is not None and token["delta"] == "before the gate. "
            transcript = client.get(f"/agents/gated/contexts/{start['contextId']}").json()
            assert [t["role"] for t in transcript["turns"]] == ["user"]
            client.post("/test/release")
            rest = [frame for frame in stream if frame is not None]
        assert rest[-1]["type"] == "done"
        assert rest[-1]["text"] == "before the gate. after the gate."


def test_idle_stream_gets_heartbeats(gated: ServerProcess) -> None:
    with (
        httpx.Client(base_url=gated.url, timeout=10) as client,
        client.stream("POST", "/agents/gated/runs", json={"message": {"text": "hi"}}) as response,
    ):
        stream = events(response)
        next(stream), next(stream)
        assert next(stream) is None  # a heartbeat comment while the agent waits
        client.post("/test/release")
        assert [f for f in stream if f is not None][-1]["type"] == "done"


def test_closed_connection_does_not_stop_the_run(gated: ServerProcess) -> None:
    with httpx.Client(base_url=gated.url, timeout=10) as client:
        with client.stream(
            "POST", "/agents/gated/runs", json={"message": {"text": "hi"}}
        ) as response:
            start = next(events(response))
        assert start is not None
        client.post("/test/release")
        url = f"/agents/gated/contexts/{start['contextId']}"
        wait_for(lambda: len(client.get(url).json()["turns"]) == 2)
        assert client.get(url).json()["turns"][1]["text"] == "before the gate. after the gate."


def test_sigterm_stops_the_server_cleanly(tmp_path: Path) -> None:
    with serve("demo", "--delay", "0", "--data-dir", str(tmp_path)) as server:
        response = httpx.get(server.url + "/healthz", timeout=5)
        assert json.loads(response.text) == {"ok": True}
        # uvicorn finishes its shutdown, then re-raises the signal it was sent.
        assert server.stop() in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in server.log()


@pytest.fixture(scope="module")
def impatient() -> Iterator[ServerProcess]:
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with serve("serve", "apps:impatient", env=env) as server:
        yield server


def test_a_reader_that_stops_reading_is_dropped_and_can_reattach(impatient: ServerProcess) -> None:
    body = json.dumps({"message": {"text": "flood"}}).encode()
    request = (
        b"POST /agents/flood/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    with socket.socket() as stalled:
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", impatient.port))
        stalled.sendall(request)
        head = stalled.recv(4096)  # the response starts...
        assert head.startswith(b"HTTP/1.1 200")
        context_id = re.search(rb'"contextId":"(ctx-[0-9a-f]{36})"', head + stalled.recv(4096))
        assert context_id is not None
        # ...then this client stops reading while 16 MB are sent.
        wait_for(lambda: "stopped reading" in impatient.log(), timeout=30)
        received = len(head)
        stalled.settimeout(5)
        with contextlib.suppress(OSError):
            while chunk := stalled.recv(1 << 20):
                received += len(chunk)
    assert received < 8_000_000  # dropped long before the end of the stream
    # Dropped as a client gone, not reported by uvicorn as a response the app left.
    assert "without completing response" not in impatient.log()

    url = f"/agents/flood/contexts/{context_id.group(1).decode()}"
    with httpx.Client(base_url=impatient.url, timeout=30) as client:
        wait_for(lambda: client.get(url).json()["activeRunId"] is None, timeout=30)
        frames = parse_sse(client.get(f"{url}/events?after=0").text)
    assert len(frames) == 4002 and frames[-1]["stopReason"] == "end"
    assert len(frames[-1]["text"]) == 4000 * 4096


def websocket_handshake(port: int, path: str, *, rcvbuf: int | None = None) -> socket.socket:
    """A raw WebSocket client's connection, its handshake sent (the answer left unread)."""
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: thinwire.v1\r\n\r\n".encode()
    )
    return sock


def masked_text_frame(text: str) -> bytes:
    """A client's text message: masked, as RFC 6455 requires (with a zero mask)."""
    data = text.encode()
    assert len(data) < 126
    return bytes((0x81, 0x80 | len(data))) + b"\0\0\0\0" + data


def test_a_websocket_that_stops_reading_is_dropped_and_frees_its_streams(
    impatient: ServerProcess,
) -> None:
    """Its connection is aborted, as a stalled SSE reader's is: a close frame could never
    reach a client that does not read, and the connection would hold its buffered
    megabytes and its user's streams until the client itself left."""
    with websocket_handshake(impatient.port, "/agents/flood/ws", rcvbuf=4096) as stalled:
        assert stalled.recv(4096).startswith(b"HTTP/1.1 101")
        stalled.sendall(masked_text_frame('{"type":"send","message":{"text":"flood"}}'))
        head = b""
        while (context_id := re.search(rb'"contextId":"(ctx-[0-9a-f]+)"', head)) is None:
            head += stalled.recv(4096)
        # ...then this client stops reading while 16 MB are sent.
        wait_for(lambda: "WebSocket that stopped reading" in impatient.log(), timeout=30)
        received = len(head)
        stalled.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while chunk := stalled.recv(1 << 20):  # a timeout here: the connection kept
                received += len(chunk)
    assert received < 8_000_000  # dropped long before the end of the stream
    assert "Exception in ASGI application" not in impatient.log()

    # The socket's stream and its run's are free again (two are all the user has): a new
    # socket follows the run (from its log), where it was refused `too_many_streams`.
    from websockets.sync.client import connect

    url = impatient.url.replace("http://", "ws://") + "/agents/flood/ws"
    attach = json.dumps({"type": "attach", "contextId": context_id.group(1).decode()})

    def follows_again() -> bool:
        # The replay is 33 MB: no waiting for the server's close behind it.
        with connect(url, subprotocols=["thinwire.v1"], close_timeout=0.1) as again:  # type: ignore[list-item]
            again.send(attach)
            return json.loads(again.recv(timeout=10))["type"] == "run_start"

    wait_for(follows_again)


def test_websocket_over_a_real_server(demo: ServerProcess) -> None:
    from websockets.sync.client import connect

    url = demo.url.replace("http://", "ws://") + "/agents/demo/ws"
    with connect(url, subprotocols=["thinwire.v1"]) as socket:  # type: ignore[list-item]
        assert socket.subprotocol == "thinwire.v1"
        socket.send(json.dumps({"type": "send", "message": {"text": "over a socket"}}))
        frames = []
        while not frames or frames[-1]["type"] != "done":
            frames.append(json.loads(socket.recv(timeout=10)))
    assert frames[0]["type"] == "run_start" and frames[-1]["stopReason"] == "end"
    assert frames[-1]["text"].startswith("You said “over a socket”")
    with connect(url) as garbage:
        garbage.send(b"\x00binary")
        assert json.loads(garbage.recv(timeout=10))["code"] == "binary_not_supported"
        with pytest.raises(Exception, match="1003"):
            garbage.recv(timeout=10)


def test_a_foreign_origins_handshake_is_refused_with_a_typed_error(demo: ServerProcess) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url = demo.url.replace("http://", "ws://") + "/agents/demo/ws"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, origin="https://evil.example")  # type: ignore[arg-type]
    answer = refused.value.response
    assert answer.status_code == 403
    assert answer.headers["Thinwire-Protocol"] == "1"
    assert json.loads(answer.body)["error"]["code"] == "origin_not_allowed"


def test_a_websocket_ticket_is_not_written_to_the_log(demo: ServerProcess) -> None:
    """It opens a socket for a minute and names its principal (deploy.md)."""
    from websockets.sync.client import connect

    ticket = httpx.post(f"{demo.url}/agents/demo/tickets").json()["ticket"]
    url = demo.url.replace("http://", "ws://") + f"/agents/demo/ws?ticket={ticket}&x=1"
    with connect(url, subprotocols=["thinwire.v1"]) as socket:  # type: ignore[list-item]
        socket.send(json.dumps({"type": "send", "message": {"text": "hi"}}))
        while json.loads(socket.recv(timeout=10))["type"] != "done":
            pass
    wait_for(lambda: "ws?ticket=" in demo.log())
    assert ticket not in demo.log() and "/agents/demo/ws?ticket=…&x=1" in demo.log()


def test_no_credential_of_a_websocket_handshake_is_logged_at_any_level(tmp_path: Path) -> None:
    """At debug level the websockets library logs every handshake header; at trace level
    uvicorn logs the scope, query string and all."""
    from websockets.sync.client import connect

    args = ("demo", "--log-level", "trace", "--data-dir", str(tmp_path))
    with serve(*args) as server:
        ticket = httpx.post(f"{server.url}/agents/demo/tickets").json()["ticket"]
        url = server.url.replace("http://", "ws://") + f"/agents/demo/ws?ticket={ticket}"
        secrets_sent = {
            "cookie": "thinwire_demo_user=cookie-value-not-to-log",
            "authorization": "Bearer bearer-token-not-to-log",
        }
        with connect(url, subprotocols=["thinwire.v1"], additional_headers=secrets_sent) as ws:  # type: ignore[list-item]
            ws.send(json.dumps({"type": "send", "message": {"text": "hi"}}))
            while json.loads(ws.recv(timeout=10))["type"] != "done":
                pass
        wait_for(lambda: "< cookie: …" in server.log())
        log = server.log()
    assert "< authorization: …" in log and "ticket=…" in log
    for value in (ticket, "cookie-value-not-to-log", "bearer-token-not-to-log"):
        assert value not in log


def test_no_access_log_writes_no_line_per_request(tmp_path: Path) -> None:
    args = ("demo", "--no-access-log", "--data-dir", str(tmp_path))
    with serve(*args) as server:
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        log = server.log()
    assert "Uvicorn running" in log and "/healthz" not in log


@pytest.fixture(scope="module")
def guarded() -> Iterator[ServerProcess]:
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = ("serve", "apps:app", "--header-timeout", "0.5", "--max-connections", "40")
    with serve(*args, env=env) as server:
        yield server


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass  # a 4xx before the close is fine too
    except TimeoutError:
        return False
    except OSError:
        return True
    return True


def test_headers_that_do_not_arrive_cost_a_connection_for_a_moment(guarded: ServerProcess) -> None:
    silent = socket.create_connection(("127.0.0.1", guarded.port))
    slow = socket.create_connection(("127.0.0.1", guarded.port))
    slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # …and no more
    with silent, slow:
        assert closed_by_server(silent, within=5)
        assert closed_by_server(slow, within=5)
    # A keep-alive connection that starts a second request and stalls goes the same way.
    with socket.create_connection(("127.0.0.1", guarded.port)) as kept:
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200 OK" in kept.recv(4096)
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHo")
        assert closed_by_server(kept, within=5)
    assert httpx.get(f"{guarded.url}/healthz").status_code == 200


def test_a_body_refused_unread_ends_its_connection(guarded: ServerProcess) -> None:
    # The rest of the body would be read as the next request: the connection goes, at once
    # rather than when keep-alive gives up on it.
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        sock.sendall(
            b"POST /agents/gated/runs HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 9999999\r\n\r\n{"
        )
        answer = sock.recv(4096)
        assert b" 413 " in answer and b"connection: close" in answer.lower()
        assert closed_by_server(sock, within=2)


def test_a_client_that_hangs_up_mid_body_is_no_server_error(guarded: ServerProcess) -> None:
    # Anyone could fill the error log with tracebacks for the price of a short request.
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        sock.sendall(
            b"POST /agents/gated/runs HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"mess'
        )
    wait_for(lambda: httpx.get(f"{guarded.url}/healthz").status_code == 200)
    with socket.create_connection(("127.0.0.1", guarded.port)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200 OK" in sock.recv(4096)  # the server has read past the hang-up
    log = guarded.log()
    assert "ClientDisconnect" not in log and "unexpected error" not in log, log[-2000:]


def test_past_the_connection_limit_a_request_is_refused_at_once(guarded: ServerProcess) -> None:
    idle = [socket.create_connection(("127.0.0.1", guarded.port)) for _ in range(45)]
    answers: list[httpx.Response] = []

    def refused() -> bool:
        answers.append(httpx.get(f"{guarded.url}/healthz"))
        return answers[-1].status_code == 503

    try:
        wait_for(refused, timeout=5)
    finally:
        for sock in idle:
            sock.close()
    # As every error: compact JSON with its code.
    message = ERROR_CODES["server_busy"]
    assert answers[-1].content == (
        f'{{"error":{{"code":"server_busy","message":"{message}","retryable":true}}}}'.encode()
    )
    assert answers[-1].headers["retry-after"] == "1"
    assert answers[-1].headers["thinwire-protocol"] == "1"
    assert answers[-1].headers["x-content-type-options"] == "nosniff"
    wait_for(lambda: httpx.get(f"{guarded.url}/healthz").status_code == 200)


def test_past_the_connection_limit_a_websocket_handshake_is_refused_at_once(
    guarded: ServerProcess,
) -> None:
    """Open sockets count toward `--max-connections` as requests do, and a handshake past
    it gets the same 503 a request does, not a socket."""
    sockets: list[socket.socket] = []
    answers: list[bytes] = []
    try:
        for _ in range(45):  # the limit is 40
            sockets.append(websocket_handshake(guarded.port, "/agents/gated/ws"))
            sockets[-1].settimeout(5)
            answers.append(sockets[-1].recv(4096))
            if answers[-1].startswith(b"HTTP/1.1 503"):
                while chunk := sockets[-1].recv(4096):  # the body, to the server's close
                    answers[-1] += chunk
                break
        assert answers[-1].startswith(b"HTTP/1.1 503"), [a[:12] for a in answers]
        assert all(answer.startswith(b"HTTP/1.1 101") for answer in answers[:-1])
        assert len(answers) > 30
        assert b'"code":"server_busy"' in answers[-1] and b"retry-after: 1" in answers[-1]
        assert httpx.get(f"{guarded.url}/healthz").status_code == 503
    finally:
        for sock in sockets:
            sock.close()
    wait_for(lambda: httpx.get(f"{guarded.url}/healthz").status_code == 200)


def test_an_oversized_websocket_message_is_refused_as_it_arrives(demo: ServerProcess) -> None:
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    url = demo.url.replace("http", "ws") + "/agents/demo/ws"
    with connect(url, max_size=None) as socket_, pytest.raises(ConnectionClosed) as closed:
        socket_.send("x" * (2 * 1024 * 1024))
        socket_.recv(timeout=5)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


def test_sigterm_mid_stream_ends_every_stream_with_its_done_and_logs_no_error(
    tmp_path: Path,
) -> None:
    args = ("demo", "--delay", "1", "--shutdown-timeout", "0.5", "--data-dir", str(tmp_path))
    with serve(*args) as server, httpx.Client(timeout=10) as client:
        body = {"message": {"text": "a slow one"}}
        with client.stream("POST", f"{server.url}/agents/demo/runs", json=body) as response:
            frames = events(response)
            assert next(frames) is not None  # the run is on
            server.process.send_signal(signal.SIGTERM)
            rest = [frame for frame in frames if frame is not None]  # …to the stream's end
        server.process.wait(10)
        log = server.log()
    assert rest[-1]["type"] == "done" and rest[-1]["stopReason"] == "interrupted"
    assert "ERROR" not in log and "Traceback" not in log, log
    assert "stopping: 1 run(s) in flight get 0.5 s to finish" in log
    assert "stopping: 0 run(s) finished, 1 interrupted" in log


def test_sigterm_mid_run_closes_a_websocket_after_its_done_with_1012(tmp_path: Path) -> None:
    """As docs/protocol.md says: the run ends with its `done`, then uvicorn closes the
    socket with 1012 (service restart)."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    args = ("demo", "--delay", "1", "--shutdown-timeout", "0.5", "--data-dir", str(tmp_path))
    with serve(*args) as server:
        url = server.url.replace("http://", "ws://") + "/agents/demo/ws"
        with connect(url) as socket_, pytest.raises(ConnectionClosed) as closed:
            socket_.send(json.dumps({"type": "send", "message": {"text": "a slow one"}}))
            frames = [json.loads(socket_.recv(timeout=10))]  # the run is on
            server.process.send_signal(signal.SIGTERM)
            while True:
                frames.append(json.loads(socket_.recv(timeout=10)))
        server.process.wait(10)
    assert frames[-1]["type"] == "done" and frames[-1]["stopReason"] == "interrupted"
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1012
    # A close code of the protocol's: a client takes it for a dropped socket, to open again.
    assert CLOSE_CODES[1012] == "network_error" and "network_error" in RETRYABLE_CODES


def test_serve_finds_a_module_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "my_agents.py").write_text(
        "from thinwire import Agent, MemoryStore, anonymous, create_app\n"
        "class Echo(Agent):\n"
        "    async def run(self, run, text):\n"
        "        await run.say(text)\n"
        "app = create_app({'echo': Echo}, identify=anonymous, store=MemoryStore())\n"
    )
    env = {"PYTHONPATH": ""}  # nothing but the working directory points at it
    with serve("serve", "my_agents:app", cwd=tmp_path, env=env) as server:
        body = {"message": {"text": "found"}}
        response = httpx.post(f"{server.url}/agents/echo/runs", json=body, timeout=10)
    assert parse_sse(response.text)[-1]["text"] == "found"


def test_a_second_server_on_one_sqlite_file_refuses_to_start(tmp_path: Path) -> None:
    with serve("demo", "--data-dir", str(tmp_path), log_dir=tmp_path) as first:
        second = serve("demo", "--data-dir", str(tmp_path), log_dir=tmp_path)
        with (
            pytest.raises(RuntimeError, match="one process owns a SQLite store") as refused,
            second,
        ):
            pass
        assert httpx.get(f"{first.url}/healthz").status_code == 200  # the first serves on
    # In one line, which says what to change: no traceback.
    assert "ERROR:    thinwire cannot start: another process serves" in str(refused.value)
    assert "Traceback" not in str(refused.value)


def test_a_store_that_does_not_answer_is_one_line_and_a_failed_exit(tmp_path: Path) -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    command = [sys.executable, "-m", "thinwire.cli", "demo", "--data-dir", str(tmp_path)]
    command += ["--store", closed, "--port", str(free_port())]
    ended = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert ended.returncode == 3, ended.stderr  # uvicorn's STARTUP_FAILURE
    errors = [line for line in ended.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == [
        errors[0],
        "ERROR:    Application startup failed. Exiting.",
    ]
    assert errors[0].startswith("ERROR:    thinwire cannot start: the store does not answer: ")
    assert "Traceback" not in ended.stderr


def test_data_of_a_newer_format_is_one_line_and_a_failed_exit(tmp_path: Path) -> None:
    path = tmp_path / "thinwire.sqlite3"
    with contextlib.closing(sqlite3.connect(path)) as connection:
        connection.execute("CREATE TABLE kept (what TEXT)")
        connection.execute("INSERT INTO kept VALUES ('a newer release wrote this')")
        connection.execute(f"PRAGMA user_version = {FORMAT + 1}")
        connection.commit()
    written = path.read_bytes()
    command = [sys.executable, "-m", "thinwire.cli", "demo", "--data-dir", str(tmp_path)]
    command += ["--port", str(free_port())]
    ended = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert ended.returncode == 3, ended.stderr  # uvicorn's STARTUP_FAILURE
    errors = [line for line in ended.stderr.splitlines() if line.startswith("ERROR")]
    assert errors == [
        f"ERROR:    thinwire cannot start: {path} holds data format {FORMAT + 1}, written by "
        f"a newer thinwire; this release reads up to format {FORMAT}: upgrade thinwire, or "
        "restore a backup taken before the newer release opened it",
        "ERROR:    Application startup failed. Exiting.",
    ]
    assert "Traceback" not in ended.stderr
    assert path.read_bytes() == written


def wait_until_closed(port: int) -> None:
    """Until the server stops accepting: it has begun to shut down."""

    def refused() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return True
        return False

    wait_for(refused)


@pytest.mark.parametrize("signals", [1, 2], ids=["sigterm", "sigterm-twice"])
def test_a_run_that_ignores_its_cancellation_holds_shutdown_only_so_long(signals: int) -> None:
    """Its runs get `--shutdown-timeout`, then `CANCEL_GRACE` once cancelled, then the
    streams their 3 s; a second SIGTERM stops waiting at once."""
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    args = ("serve", "apps:stubborn", "--shutdown-timeout", "0.1")
    with serve(*args, env=env) as server, httpx.Client(timeout=30) as client:
        body = {"message": {"text": "hold on"}}
        with client.stream("POST", f"{server.url}/agents/stubborn/runs", json=body) as response:
            frames = events(response)
            assert next(frames) is not None  # the run is on, its stream open
            server.process.send_signal(signal.SIGTERM)
            if signals == 2:
                wait_until_closed(server.port)
                server.process.send_signal(signal.SIGTERM)
                assert server.process.wait(CANCEL_GRACE) == -signal.SIGTERM
            else:
                assert server.process.wait(CANCEL_GRACE + STREAMS_GRACE + 5) == -signal.SIGTERM
        log = server.log()
    if signals == 1:
        assert "WARNING:     thinwire: 1 run(s) ignored their cancellation" in log


@pytest.mark.parametrize(
    ("target", "extra"),
    [
        ("/agents/demo/ws?ticket=" + "A" * 8200, b""),
        ("/agents/demo/ws", b"Cookie: user=alice; pad=" + b"A" * 9000 + b"\r\n"),
    ],
    ids=["long-target", "long-header"],
)
def test_a_websocket_handshake_too_large_is_refused_and_closed(
    guarded: ServerProcess, target: str, extra: bytes
) -> None:
    request = (
        (
            f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            "Sec-WebSocket-Version: 13\r\n"
        ).encode()
        + extra
        + b"\r\n"
    )
    with socket.create_connection(("127.0.0.1", guarded.port)) as handshake:
        handshake.sendall(request)
        handshake.settimeout(5)
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := handshake.recv(4096):  # to the server's close, or the timeout
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 400"), answer[:100]
    assert b"WebSocket handshake too large" in answer
