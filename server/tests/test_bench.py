"""The bench's own checks: its load generator must catch a wrong stream, and its report
must read the targets off the figures. (The servers themselves are measured by
`make bench`, not here.)"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.load import Checker, Result, SseProtocol
from bench.report import report, targets
from bench.servers import delta


def chunked(events: list[str]) -> bytes:
    body = b""
    for event in events:
        data = event.encode()
        body += b"%x\r\n%s\r\n" % (len(data), data)
    return body + b"0\r\n\r\n"


def token(seq: int, i: int) -> str:
    return f'id: {seq}\ndata: {{"seq":{seq},"type":"token","delta":"{delta(i)}"}}\n\n'


def read(events: list[str], deltas: int, split: int = 7) -> Result:
    loop = asyncio.new_event_loop()
    try:
        done: asyncio.Future[Result] = loop.create_future()
        protocol = SseProtocol(b"", Checker(deltas, 0.0), done)
        stream = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(events)
        for start in range(0, len(stream), split):  # in awkward pieces
            protocol.data_received(stream[start : start + split])
        return done.result()
    finally:
        loop.close()


def test_a_whole_stream_in_order_passes() -> None:
    events = [token(i + 1, i) for i in range(5)]
    events.append('id: 6\ndata: {"seq":6,"type":"done","text":"w0 w1 w2 w3 w4 "}\n\n')
    result = read(events, 5)
    assert result.ok and result.deltas == 5, result.error


def test_a_missing_or_reordered_delta_fails() -> None:
    done = 'id: 9\ndata: {"seq":9,"type":"done"}\n\n'
    swapped = [token(1, 0), token(2, 2), token(3, 1), done.replace("9", "4")]
    assert "where w1 was due" in read(swapped, 3).error
    assert not read([token(1, 0), token(3, 1), done], 2).ok  # a seq skipped
    assert "2 of 3 deltas" in read([token(1, 0), token(2, 1), done.replace("9", "3")], 3).error
    assert "no closing frame" in read([token(1, 0)], 1).error


def row(server: str, concurrency: int, **figures: float) -> dict[str, Any]:
    base = {
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


def test_the_report_reads_the_targets_off_the_figures() -> None:
    results = {
        "plan": {"deltas": 200},
        "streams": [
            row("bare", 1),
            row("thinwire", 1, ttff_p50_ms=4.0),
            row("bare", 50),
            row("thinwire", 50, deltas_per_s=900.0),
        ],
        "client": {
            "sizes": [
                {"name": "thinwire: useAgent", "minBytes": 30, "gzipBytes": 10},
                {"name": "ai-sdk: useChat", "minBytes": 300, "gzipBytes": 100},
            ]
        },
    }
    found = {target: (measured, met) for target, measured, met in targets(results)}
    assert found["thinwire deltas/s ≥ 0.8x bare at C=50"] == ("0.90x", True)
    assert found["first-delta overhead ≤ 2 ms p50 over bare at C=1"] == ("+3.00 ms", False)
    assert found["client ≤ ¼ of ai + @ai-sdk/react (min+gzip)"] == ("0.10x", True)
    text = report(results)
    assert "| thinwire | 50 | 0.9k (0.90x) |" in text and "**missed**" in text
