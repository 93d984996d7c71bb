"""The bench's own checks: its load generator must catch a wrong stream, and its report
must read the targets off the figures. (The servers themselves are measured by
`make bench`, not here.)"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from starlette.testclient import TestClient

from bench import capacity, throughput
from bench.capacity import CapacityPlan, run_capacity
from bench.load import Checker, Result, SseProtocol, Target, WsProtocol
from bench.report import report, targets
from bench.servers import NoStore, delta, thinwire_app, work_text
from bench.stats import paired
from bench.throughput import Plan, Workload, run_throughput
from conftest import parse_sse


def chunked(events: list[str]) -> bytes:
    body = b""
    for event in events:
        data = event.encode()
        body += b"%x\r\n%s\r\n" % (len(data), data)
    return body + b"0\r\n\r\n"


def token(seq: int, i: int) -> str:
    return f'id: {seq}\ndata: {{"seq":{seq},"type":"token","delta":"{delta(i)}"}}\n\n'


class Transport(asyncio.Transport):
    """Records what the protocol writes."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def response(events: list[str], head: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n{head}\r\n".encode() + chunked(events)


def feed(protocol: asyncio.Protocol, data: bytes, split: int = 7) -> None:
    for start in range(0, len(data), split):  # in awkward pieces
        protocol.data_received(data[start : start + split])


def whole(deltas: int, first_seq: int = 1) -> list[str]:
    events = [token(first_seq + i, i) for i in range(deltas)]
    text = "".join(delta(i) for i in range(deltas))
    seq = first_seq + deltas
    return [*events, f'id: {seq}\ndata: {{"seq":{seq},"type":"done","text":"{text}"}}\n\n']


def read(events: list[str], deltas: int, split: int = 7) -> Result:
    loop = asyncio.new_event_loop()
    try:
        done: asyncio.Future[Result] = loop.create_future()
        protocol = SseProtocol()
        protocol.connection_made(Transport())
        protocol.begin(b"", Checker(deltas, 0.0), done)
        feed(protocol, response(events), split)
        return done.result()
    finally:
        loop.close()


def test_a_whole_stream_in_order_passes() -> None:
    result = read(whole(5), 5)
    assert result.ok and result.deltas == 5, result.error


def test_a_kept_http_connection_reads_one_response_after_another() -> None:
    loop = asyncio.new_event_loop()
    try:
        transport = Transport()
        protocol = SseProtocol()
        protocol.connection_made(transport)
        for request, deltas in ((b"first", 3), (b"second", 4)):
            done: asyncio.Future[Result] = loop.create_future()
            protocol.begin(request, Checker(deltas, 0.0), done)
            # The body's last CRLF alone in the next piece: the response is not over yet.
            stream = response(whole(deltas))
            feed(protocol, stream[:-2])
            assert not done.done()
            feed(protocol, stream[-2:])
            assert done.result().ok, done.result().error
            assert protocol.reusable and not transport.closed
        assert transport.written == [b"first", b"second"]
        # A server that says it closes the connection is not asked again.
        done = loop.create_future()
        protocol.begin(b"third", Checker(1, 0.0), done)
        feed(protocol, response(whole(1), head="Connection: close\r\n"))
        assert done.result().ok and not protocol.reusable
    finally:
        loop.close()


def ws_frame(text: str) -> bytes:
    payload = text.encode()
    assert len(payload) < 126
    return bytes([0x81, len(payload)]) + payload


def unmasked(frame: bytes) -> bytes:
    mask, payload = frame[2:6], frame[6:]
    return bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def test_a_kept_websocket_runs_one_send_after_another() -> None:
    loop = asyncio.new_event_loop()
    try:
        transport = Transport()
        protocol = WsProtocol(Target("thinwire-ws", 1, "/agents/deltas/ws", "ws"))
        protocol.connection_made(transport)
        for deltas in (2, 3):
            done: asyncio.Future[Result] = loop.create_future()
            protocol.begin(deltas, "yield", Checker(deltas, 0.0), done)
            if deltas == 2:  # the first `send` waits for the handshake
                assert len(transport.written) == 1
                protocol.data_received(b"HTTP/1.1 101 Switching Protocols\r\n\r\n")
            command = unmasked(transport.written[-1])
            assert f'"text": "{deltas} yield"'.encode() in command
            frames = [e.split("data: ")[1].strip() for e in whole(deltas)]
            feed(protocol, b"".join(ws_frame(f) for f in frames))
            assert done.result().ok, done.result().error
            assert protocol.reusable and not transport.closed
        protocol.close()
        assert transport.closed and transport.written[-1][0] == 0x88  # a close frame
    finally:
        loop.close()


def test_a_missing_or_reordered_delta_fails() -> None:
    done = 'id: 9\ndata: {"seq":9,"type":"done"}\n\n'
    swapped = [token(1, 0), token(2, 2), token(3, 1), done.replace("9", "4")]
    assert "where w1 was due" in read(swapped, 3).error
    assert not read([token(1, 0), token(3, 1), done], 2).ok  # a seq skipped
    assert "2 of 3 deltas" in read([token(1, 0), token(2, 1), done.replace("9", "3")], 3).error
    assert "no closing frame" in read([token(1, 0)], 1).error


def row(server: str, concurrency: int, **figures: Any) -> dict[str, Any]:
    base = {
        "workload": "burst",
        "round": 1,
        "server": server,
        "concurrency": concurrency,
        "streams": 10,
        "failures": 0,
        "deltas_per_s": 1000.0,
        "ttff_p50_ms": 1.0,
        "ttff_p99_ms": 2.0,
        "total_p50_ms": 5.0,
        "total_p99_ms": 9.0,
        "cpu_s_per_1k": 0.01,
        "peak_rss_mb": 50.0,
        "loadgen_cpu_s_per_1k": 0.01,
        "loadgen_cpu_util": 0.5,
    }
    return {**base, **figures}


def test_rounds_are_paired_with_bare_of_the_same_round_and_the_median_kept() -> None:
    rows = [
        row("bare", 50, round=1, deltas_per_s=1000.0),
        row("bare", 50, round=2, deltas_per_s=2000.0),
        row("bare", 50, round=3, deltas_per_s=1000.0),
        row("thinwire", 50, round=1, deltas_per_s=900.0),
        row("thinwire", 50, round=2, deltas_per_s=2400.0),
        row("thinwire", 50, round=3, deltas_per_s=800.0),
    ]
    thinwire = next(r for r in paired(rows) if r["server"] == "thinwire")
    # Paired: 0.9, 1.2, 0.8 (not 2400 / 2000 against the best of each).
    assert [round(r, 2) for r in thinwire["ratios"]["deltas_per_s"]] == [0.9, 1.2, 0.8]
    assert round(thinwire["ratio"]["deltas_per_s"], 2) == 0.9
    assert thinwire["deltas_per_s"] == 900.0 and thinwire["rounds"] == 3


def test_the_report_reads_the_targets_off_the_figures() -> None:
    results = {
        "plan": {"deltas": 200},
        "streams": [
            row("bare", 1),
            row("thinwire", 1, ttff_p50_ms=4.0),
            row("bare", 50),
            row("thinwire", 50, deltas_per_s=1100.0),
            row("thinwire-ws", 50, deltas_per_s=990.0),
            row("bare", 50, workload="yield", cpu_s_per_1k=0.010),
            row("thinwire", 50, workload="yield", deltas_per_s=800.0, cpu_s_per_1k=0.016),
        ],
        "capacity": {
            "deltas": 100,
            "interval_s": 0.02,
            "ideal_s": 2.0,
            "tolerance": 1.1,
            "rows": [
                {
                    "server": "bare",
                    "sustained": [400, 500, 450],
                    "sustained_median": 450,
                    "ratios": [],
                    "ratio": None,
                    "stream_p50_s": 2.1,
                    "stream_p99_s": 2.2,
                    "cpu_s_per_1k": 0.04,
                    "server_cpu_util": 0.9,
                    "loadgen_cpu_util": 0.3,
                },
                {
                    "server": "thinwire",
                    "sustained": [360, 380, 400],
                    "sustained_median": 380,
                    "ratios": [0.9, 0.76, 0.89],
                    "ratio": 0.89,
                    "stream_p50_s": 2.1,
                    "stream_p99_s": 2.2,
                    "cpu_s_per_1k": 0.05,
                    "server_cpu_util": 0.9,
                    "loadgen_cpu_util": 0.3,
                },
            ],
        },
        "client": {
            "sizes": [
                {"name": "thinwire: useAgent", "minBytes": 30, "gzipBytes": 10},
                {"name": "ai-sdk: useChat", "minBytes": 300, "gzipBytes": 100},
            ]
        },
    }
    found = {target: (measured, met) for target, measured, met in targets(results)}
    assert found["burst: deltas/s ≥ 1.0x bare at C=50"] == ("1.10x", True)
    assert found["burst: first-delta overhead ≤ 1 ms p50 over bare at C=1"] == ("+3.00 ms", False)
    assert found["burst: WebSocket deltas/s ≥ 1.0x SSE at C=50"] == ("0.90x", False)
    assert found["yield: server CPU per delta ≤ 1.5x bare-yield at C=50"] == ("1.60x", False)
    assert found["yield: deltas/s ≥ 0.7x bare-yield at C=50"] == ("0.80x", True)
    assert found["paced at 50 tokens/s: thinwire streams per core ≥ 0.8x bare's"] == (
        "0.89x",
        True,
    )
    assert found["client ≤ ¼ of ai + @ai-sdk/react (min+gzip)"] == ("0.10x", True)
    text = report(results)
    assert "| thinwire | 50 | 1.1k (1.10x) | 1.10 |" in text and "**missed**" in text
    assert "| thinwire | 360 380 400 | 380 | 0.90 0.76 0.89 | 0.89x |" in text


def test_long_conversation_and_listing_targets_compare_sizes_and_read_p99() -> None:
    def size(cpu: float, first: float, read_p99: float) -> dict[str, Any]:
        kind = {"cpu_ms": cpu, "first_delta_p50_ms": first, "first_delta_p99_ms": first}
        reads = {"read_p50_ms": 1.0, "read_p99_ms": read_p99}
        resumes = {"resume_page": 50, "resume_p50_ms": 0.5, "resume_p99_ms": read_p99 / 3}
        return {"cold": kind, "hot": kind, **reads, **resumes}

    sizes = {"10": size(1.0, 2.0, 1.0), "1000": size(1.2, 2.5, 7.5), "5000": size(1.4, 3.2, 9.0)}
    results = {
        "conversations": {"sizes": sizes},
        "listing": {"conversations": 10_000, "page": 50, "pages": 400, "p50_ms": 1, "p99_ms": 6},
    }
    found = {target: (measured, met) for target, measured, met in targets(results)}
    # A resume reads the hook's first page; the whole read is shown beside it.
    assert found["cold resume of 1,000 turns ≤ 3 ms p99"] == ("2.50 ms", True)
    assert "| 1000 | 1.20 | 2.50 | 2.50 | 1.20 | 2.50 | 2.50 | 0.50 | 2.50 | 1.00 | 7.50 |" in (
        report(results)
    )
    assert found["cold send CPU at 5,000 turns ≤ 1.5x at 10"] == ("1.40x", True)
    assert found["hot first delta at 5,000 turns ≤ 1.5x at 10"] == ("1.60x", False)
    assert found["a page of 50 of 10,000 conversations ≤ 5 ms p99"] == ("6.00 ms", False)
    assert "400 pages of 50 through 10,000 conversations" in report(results)


def test_chat_agent_is_read_against_run_say_and_shown_against_the_sdk_by_hand() -> None:
    model = [
        row(server, 1, workload="model", round=n, cpu_s_per_1k=cpu)
        for n, figures in ((1, (0.040, 0.050, 0.060)), (2, (0.040, 0.046, 0.050)))
        for server, cpu in zip(
            ("thinwire-say", "thinwire-chat", "thinwire-sdk"), figures, strict=True
        )
    ]
    results = {"model": model}
    found = {target: (measured, met) for target, measured, met in targets(results)}
    # The target's baseline is run.say (1.25x, 1.15x): the hand-written agent is beside it.
    assert found["ChatAgent CPU per token ≤ 1.2x run.say at C=1"] == ("1.20x", True)
    text = report(results)
    assert "| thinwire-sdk | 1 |" in text
    assert "C=1: 0.83 0.92 (0.88x)." in text


def test_nostore_streams_a_whole_run_and_keeps_none_of_it() -> None:
    store = NoStore()
    app = thinwire_app(15.0, store)
    with TestClient(app) as client:
        response = client.post("/agents/deltas/runs", json={"message": {"text": work_text(3)}})
        frames = parse_sse(response.text)
        assert [f["delta"] for f in frames if f["type"] == "token"] == [delta(i) for i in range(3)]
        assert frames[-1]["type"] == "done"
        context_id = frames[0]["contextId"]
    assert asyncio.run(store.load(context_id)) is None
    assert asyncio.run(store.read_events(context_id)) == []


def test_paced_runs_the_planned_servers_asked_for_and_any_extra_one_named(
    monkeypatch: Any,
) -> None:
    started: list[str] = []

    @contextlib.contextmanager
    def fake_server(name: str) -> Iterator[tuple[None, Target]]:
        started.append(name)
        yield None, Target(name, 1, "/")

    monkeypatch.setattr(capacity, "server_for", fake_server)
    monkeypatch.setattr(capacity, "summarize_capacity", lambda *args: {})
    generator = SimpleNamespace(run=lambda *args, **kwargs: None)
    plan = CapacityPlan(rounds=0)
    run_capacity(plan, ("bare", "thinwire", "thinwire-memory", "thinwire-nostore"), generator)
    assert started == ["bare", "thinwire", "thinwire-nostore"]


def test_streams_measure_the_servers_asked_for_and_any_extra_one_named(
    monkeypatch: Any,
) -> None:
    measured: list[tuple[str, int]] = []

    @contextlib.contextmanager
    def fake_server(name: str) -> Iterator[tuple[None, Target]]:
        yield None, Target(name, 1, "/")

    def fake_measure(
        generator: Any, name: str, server: Any, target: Any, c: int, *rest: Any, **kw: Any
    ) -> dict[str, Any]:
        measured.append((name, c))
        return {}

    monkeypatch.setattr(throughput, "server_for", fake_server)
    monkeypatch.setattr(throughput, "measure", fake_measure)
    generator = SimpleNamespace(run=lambda *args, **kwargs: None)
    plan = Plan(
        10, (Workload("yield", ((1, 5), (500, 5)), skip=(("thinwire-nostore", 500),)),), 1.0, 1
    )
    run_throughput(plan, ("bare", "thinwire-nostore"), generator)
    assert measured == [("bare", 1), ("thinwire-nostore", 1), ("bare", 500)]


def test_the_load_client_knows_a_websocket_heartbeat() -> None:
    from bench.load import HEARTBEAT as BENCH_HEARTBEAT
    from thinwire.websocket import HEARTBEAT

    assert HEARTBEAT.encode() == BENCH_HEARTBEAT
