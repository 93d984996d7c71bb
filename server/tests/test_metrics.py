"""Metrics at `GET /admin/metrics`: counters that move as runs, streams, refusals and
writes happen, behind the operator token, in Prometheus's text format."""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from conftest import app_for, decide, send, stop_over_websocket
from thinwire import Agent, Run
from thinwire.demo import DemoAgent
from thinwire.errors import StoreError
from thinwire.metrics import sample
from thinwire.records import MODEL_NAME_LENGTH
from thinwire.testing.server import ServerProcess, serve

TOKEN = "operator-token-for-tests"
AUTH = {"authorization": f"Bearer {TOKEN}"}
HERE = Path(__file__).parent
#: A model name with the characters a label value must escape (a newline, `record_usage`
#: makes a space: `test_a_label_value_cannot_break_its_line` has it).
ODD_MODEL = 'gpt "quoted" \\ back\\slash'

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"(?P<name>{NAME})(?:\{{(?P<labels>{LABEL}(?:,{LABEL})*)?\}})? (?P<value>\S+)")
PAIR = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}


def unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)


def parse(text: str) -> Series:
    """The exposition's samples, read strictly (format 0.0.4): each family's HELP and
    TYPE once and before its samples, every sample in the family last typed, labels
    quoted and escaped as the format says, no series twice; a histogram's buckets
    cumulative, ending at +Inf, with its count."""
    assert text.endswith("\n") and "\n\n" not in text
    series: Series = {}
    typed: dict[str, str] = {}
    helped: set[str] = set()
    current: str | None = None
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert re.fullmatch(NAME, name) and name not in helped and name not in typed, line
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert re.fullmatch(NAME, name) and name not in typed and kind in TYPES, line
            typed[name], current = kind, name
            continue
        assert not line.startswith("#"), line
        match = SAMPLE.fullmatch(line)
        assert match is not None and current is not None, line
        name = match["name"]
        if typed[current] == "histogram":
            assert name in {f"{current}_bucket", f"{current}_sum", f"{current}_count"}, line
        else:
            assert name == current, line
        labels = frozenset(
            (key, unescape(value)) for key, value in PAIR.findall(match["labels"] or "")
        )
        assert len(labels) == len(PAIR.findall(match["labels"] or "")), line
        value = match["value"]
        assert value in {"+Inf", "-Inf", "NaN"} or re.fullmatch(r"-?[0-9.e+-]+", value), line
        assert (name, labels) not in series, f"{line}: twice"
        series[name, labels] = float(value)
    for name, kind in typed.items():
        assert name in helped
        if kind == "histogram":
            buckets = sorted(
                (math.inf if dict(labels)["le"] == "+Inf" else float(dict(labels)["le"]), v)
                for (sample, labels), v in series.items()
                if sample == f"{name}_bucket"
            )
            counts = [count for _, count in buckets]
            assert buckets[-1][0] == math.inf and counts == sorted(counts)
            assert counts[-1] == series[f"{name}_count", frozenset()]
    return series


def scrape(client: TestClient | ServerProcess) -> Series:
    if isinstance(client, TestClient):
        response = client.get("/admin/metrics", headers=AUTH)
    else:
        response = httpx.get(f"{client.url}/admin/metrics", headers=AUTH, timeout=5)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse(response.text)


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def moved(before: Series, after: Series, name: str, **labels: str) -> float:
    """How far a series moved between two scrapes: the process's counters are shared by
    every app a test makes."""
    return value(after, name, **labels) - value(before, name, **labels)


class Failing(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("about to fail. ")
        raise RuntimeError("boom")


class Asking(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say(f"{await run.interrupt('Go on?', options=['yes'])}.")


class Metered(Agent):
    async def run(self, run: Run, text: str) -> None:
        run.record_usage(ODD_MODEL, 12, 5)
        run.record_usage("small", 3, 1)
        run.record_usage(ODD_MODEL, 8, 0)
        await run.say("counted.")


#: A model name as a hostile model server could give one: long, with controls and an override.
HOSTILE_MODEL = "\u202egpt\r\tnul\x00" + "x" * 1_000_000


class HostileModel(Agent):
    async def run(self, run: Run, text: str) -> None:
        run.record_usage(HOSTILE_MODEL, 7, 2)
        await run.say("counted.")


class Endless(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("going. ")
        await asyncio.Event().wait()


@pytest.fixture
def client() -> Iterator[TestClient]:
    agents: Any = {
        "demo": lambda: DemoAgent(delay=0),
        "failing": Failing,
        "asking": Asking,
        "metered": Metered,
        "hostile-model": HostileModel,
        "endless": Endless,
    }
    with TestClient(app_for(agents, operator_token=TOKEN, max_streams=2)) as test_client:
        yield test_client


def test_the_metrics_need_the_operator_token() -> None:
    with TestClient(app_for({"demo": DemoAgent})) as off:  # no operator API: no metrics
        assert off.get("/admin/metrics", headers=AUTH).status_code == 404
    with TestClient(app_for({"demo": DemoAgent}, operator_token=TOKEN)) as client:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
            refused = client.get("/admin/metrics", headers=headers)
            assert (refused.status_code, refused.json()["error"]["code"]) == (401, "unauthorized")
            assert refused.headers["www-authenticate"] == "Bearer"
        series = scrape(client)
    info = [labels for (name, labels), _ in series.items() if name == "thinwire_info"]
    assert len(info) == 1 and {"version", "sqlite_format", "redis_format"} <= dict(info[0]).keys()
    assert 0 < value(series, "thinwire_process_start_time_seconds") <= time.time()
    assert value(series, "thinwire_store_ready") == 1
    assert value(series, "thinwire_runs_started_total", agent="demo") >= 0  # shown from 0


def test_runs_are_counted_by_agent_and_outcome(client: TestClient) -> None:
    before = scrape(client)
    send(client, "hi")
    assert send(client, "hi", agent="failing")[-1]["stopReason"] == "error"
    asked = send(client, "hi", agent="asking")
    assert asked[-1]["stopReason"] == "interrupted"
    decide(client, asked, "yes", agent="asking")
    _, done = stop_over_websocket(client, "hi", at="token", agent="endless")
    assert done["stopReason"] == "stopped"
    after = scrape(client)

    def runs(agent: str, outcome: str | None = None) -> float:
        if outcome is None:
            return moved(before, after, "thinwire_runs_started_total", agent=agent)
        return moved(before, after, "thinwire_runs_ended_total", agent=agent, outcome=outcome)

    assert (runs("demo"), runs("demo", "end")) == (1, 1)
    assert (runs("failing"), runs("failing", "error")) == (1, 1)
    assert (runs("asking"), runs("asking", "interrupted"), runs("asking", "end")) == (2, 1, 1)
    assert (runs("endless"), runs("endless", "stopped")) == (1, 1)
    assert moved(before, after, "thinwire_interrupts_asked_total", agent="asking") == 1
    assert moved(before, after, "thinwire_interrupts_answered_total", agent="asking") == 1
    for agent in ("demo", "failing", "asking", "endless"):
        assert moved(before, after, "thinwire_runs_in_progress", agent=agent) == 0
    # Each run saved its start and its end.
    assert moved(before, after, "thinwire_store_writes_total") >= 10
    assert moved(before, after, "thinwire_store_write_seconds_count") >= 10


def test_model_tokens_are_counted_by_model(client: TestClient) -> None:
    before = scrape(client)
    send(client, "hi", agent="metered")
    after = scrape(client)
    tokens = "thinwire_model_tokens_total"
    assert moved(before, after, tokens, model=ODD_MODEL, direction="input") == 20
    assert moved(before, after, tokens, model=ODD_MODEL, direction="output") == 5
    assert moved(before, after, tokens, model="small", direction="input") == 3
    assert moved(before, after, tokens, model="small", direction="output") == 1


def test_a_model_name_is_counted_short_and_plain(client: TestClient) -> None:
    """The name is the model server's to give: as a label and a usage key it is cut, as a
    title is, and without the characters that would make it read as another."""
    before = scrape(client)
    context_id = send(client, "hi", agent="hostile-model")[0]["contextId"]
    scraped = client.get("/admin/metrics", headers=AUTH)
    assert len(scraped.content) < 20_000
    after = parse(scraped.text)
    shown = "gpt nul" + "x" * (MODEL_NAME_LENGTH - 8) + "…"  # NUL and U+202E gone
    tokens = "thinwire_model_tokens_total"
    assert moved(before, after, tokens, model=shown, direction="input") == 7
    usage = client.get(f"/admin/agents/hostile-model/contexts/{context_id}/usage", headers=AUTH)
    assert len(usage.content) < 5_000
    assert list(usage.json()["total"]) == [shown]


def test_a_label_value_cannot_break_its_line() -> None:
    """Escaped as the format says; any other control character (a carriage return, which
    a line-based reader splits on) goes as U+FFFD."""
    line = sample("m", {"model": 'a"b\\c\nd\re\x00f\x85g'}, 1)
    assert line == 'm{model="a\\"b\\\\c\\nd\ufffde\ufffdf\ufffdg"} 1'
    assert line.isprintable()


def test_a_websocket_is_an_open_stream_and_a_refusal_is_counted(client: TestClient) -> None:
    before = scrape(client)
    with client.websocket_connect("/agents/endless/ws") as socket:
        socket.send_json({"type": "send", "message": {"text": "hi"}})
        assert socket.receive_json()["type"] == "run_start"
        during = scrape(client)
        assert moved(before, during, "thinwire_streams_open", transport="websocket") == 1
        assert moved(before, during, "thinwire_runs_in_progress", agent="endless") == 1
        # Two streams each (max_streams=2): the socket and the run it follows hold them.
        refused = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
        assert refused.status_code == 429
    after = scrape(client)
    assert moved(before, after, "thinwire_streams_open", transport="websocket") == 0
    assert moved(before, after, "thinwire_refusals_total", code="too_many_streams") == 1
    too_many = {"code": "too_many_streams", "status": "429"}
    assert moved(before, after, "thinwire_http_errors_total", **too_many) == 1


def test_error_responses_are_counted_by_code(client: TestClient) -> None:
    before = scrape(client)
    assert client.get(f"/agents/demo/contexts/ctx-{'0' * 36}").status_code == 404
    assert client.get("/agents/nobody/contexts").status_code == 404
    after = scrape(client)
    missing = {"code": "context_not_found", "status": "404"}
    assert moved(before, after, "thinwire_http_errors_total", **missing) == 1
    nobody = {"code": "agent_not_found", "status": "404"}
    assert moved(before, after, "thinwire_http_errors_total", **nobody) == 1


def test_a_refused_write_is_counted_and_the_store_shown_not_ready(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    context_id = send(client, "hi")[0]["contextId"]
    before = scrape(client)
    store = client.app.state.thinwire.store  # type: ignore[attr-defined]

    async def refused(*args: Any, **kwargs: Any) -> int:
        raise StoreError("the store is unavailable; try again shortly")

    monkeypatch.setattr(store, "save", refused)
    again = {"message": {"text": "again"}, "contextId": context_id}
    assert client.post("/agents/demo/runs", json=again).status_code == 503
    after = scrape(client)
    assert moved(before, after, "thinwire_store_write_failures_total", kind="save") == 1
    assert (value(before, "thinwire_store_ready"), value(after, "thinwire_store_ready")) == (1, 0)


@pytest.fixture(scope="module")
def gated() -> Iterator[ServerProcess]:
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    with serve("serve", "apps:metered", env=env) as server:
        yield server


def test_an_sse_stream_is_open_while_it_streams(gated: ServerProcess) -> None:
    before = scrape(gated)
    body = {"message": {"text": "hi"}}
    with httpx.stream("POST", f"{gated.url}/agents/gated/runs", json=body, timeout=10) as sse:
        lines = sse.iter_lines()
        assert next(line for line in lines if line.startswith("data:"))  # run_start
        during = scrape(gated)
        assert moved(before, during, "thinwire_streams_open", transport="sse") == 1
        assert moved(before, during, "thinwire_runs_in_progress", agent="gated") == 1
        assert httpx.post(f"{gated.url}/test/release", timeout=5).status_code == 200
        assert any('"type":"done"' in line for line in lines)
        for _ in lines:  # to the end of the body
            pass
    after = scrape(gated)
    assert moved(before, after, "thinwire_streams_open", transport="sse") == 0
    assert moved(before, after, "thinwire_runs_in_progress", agent="gated") == 0
    assert moved(before, after, "thinwire_runs_ended_total", agent="gated", outcome="end") == 1


def test_the_parser_is_strict() -> None:
    good = '# HELP a_total A.\n# TYPE a_total counter\na_total{m="q\\"\\\\\\n"} 1\n'
    assert parse(good) == {("a_total", frozenset({("m", 'q"\\\n')})): 1.0}
    for bad in (
        good.replace('\\"', '"'),  # a quote unescaped
        good.replace("# TYPE a_total counter\n", ""),  # a sample of no typed family
        good + 'a_total{m="q\\"\\\\\\n"} 2\n',  # a series twice
        good[:-1],  # no newline at the end
    ):
        with pytest.raises(AssertionError):
            parse(bad)


def test_the_deploy_doc_lists_every_metric_with_its_type(client: TestClient) -> None:
    response = client.get("/admin/metrics", headers=AUTH)
    families = dict(re.findall(r"^# TYPE (\S+) (\S+)$", response.text, flags=re.M))
    text = (HERE.parent.parent / "docs/deploy.md").read_text(encoding="utf-8")
    section = text.split("\n## Metrics\n")[1].split("\n## ")[0]
    documented = dict(re.findall(r"^\| `(thinwire_\w+)` \| (\w+) \|", section, flags=re.M))
    assert documented == families
