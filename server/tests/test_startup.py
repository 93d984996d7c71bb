"""What the app says as it starts and stops: a misconfiguration in one line, what it
serves from, and a run that will not stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from conftest import app_for
from thinwire import Agent, MemoryStore, Run, SQLiteStore, mount, serving
from thinwire import server as server_module
from thinwire.demo import DemoAgent, create_demo_app
from thinwire.errors import Misconfigured
from thinwire.models.openai import OPENAI_ENDPOINT

TOKEN = "an-operator-token-long-enough"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def startup_failure(app: Any) -> str:
    """What the app's lifespan tells the server when its startup fails."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "lifespan.startup"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    with contextlib.suppress(Exception):
        await app(scope, receive, send)
    assert sent[-1]["type"] == "lifespan.startup.failed"
    return str(sent[-1]["message"])


def failing_store(failure: BaseException) -> MemoryStore:
    class Failing(MemoryStore):
        async def open(self) -> None:
            raise failure

    return Failing()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("failure", "line"),
    [
        (Misconfigured("another process serves x.db"), "another process serves x.db"),
        (
            PermissionError(13, "Permission denied", "/data/thinwire.sqlite3.lock"),
            "the store cannot be opened: [Errno 13] Permission denied: "
            "'/data/thinwire.sqlite3.lock'",
        ),
    ],
    ids=["misconfigured", "oserror"],
)
async def test_a_misconfigured_startup_is_reported_in_one_line(
    failure: BaseException, line: str
) -> None:
    message = await startup_failure(app_for({"demo": DemoAgent}, store=failing_store(failure)))
    assert message == f"thinwire cannot start: {line}"


@pytest.mark.anyio
async def test_an_agent_that_cannot_be_made_is_one_line_too() -> None:
    class Broken(Agent):
        def __init__(self) -> None:
            raise KeyError("OPENAI_API_KEY")

    message = await startup_failure(app_for({"demo": Broken}))
    assert message == (
        "thinwire cannot start: the agent 'demo' cannot be created: KeyError('OPENAI_API_KEY')"
    )


@pytest.mark.anyio
async def test_an_unexpected_startup_failure_keeps_its_traceback() -> None:
    store = failing_store(RuntimeError("a bug in a store"))
    message = await startup_failure(app_for({"demo": DemoAgent}, store=store))
    assert message.startswith("Traceback") and "RuntimeError: a bug in a store" in message


@pytest.mark.anyio
async def test_an_app_a_thinwire_app_is_mounted_in_reports_it_in_one_line_when_served() -> None:
    parent = Starlette()
    store = failing_store(Misconfigured("the store does not answer"))
    mount(parent, "/api", app_for({"demo": DemoAgent}, store=store))
    served = serving.reporting_misconfiguration(parent)
    assert await startup_failure(served) == "thinwire cannot start: the store does not answer"


def test_startup_says_where_the_store_is_and_whether_the_operator_api_is_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain = app_for({"demo": DemoAgent})
    on_disk = app_for(
        {"demo": DemoAgent}, store=SQLiteStore(tmp_path / "db.sqlite3"), operator_token=TOKEN
    )
    with caplog.at_level("INFO", logger="thinwire"):
        for app in (plain, on_disk):
            with TestClient(app):
                pass
    serving_lines = [message for message in caplog.messages if message.startswith("serving")]
    replicas = [app.state.thinwire.coordinator.replica_id for app in (plain, on_disk)]
    assert serving_lines == [
        f"serving demo as {replicas[0]}, store: memory (gone when the process exits), "
        "operator API: off",
        f"serving demo as {replicas[1]}, store: SQLite {tmp_path / 'db.sqlite3'}, "
        "operator API: on, at /admin",
    ]
    assert TOKEN not in caplog.text


def test_startup_says_where_a_mounted_apps_operator_api_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    parent = Starlette()
    mount(parent, "/api", app_for({"demo": DemoAgent}, operator_token=TOKEN))
    with caplog.at_level("INFO", logger="thinwire"), TestClient(parent) as client:
        listed = client.get("/api/admin/agents", headers={"authorization": f"Bearer {TOKEN}"})
        assert listed.status_code == 200
    serving_lines = [message for message in caplog.messages if message.startswith("serving")]
    assert len(serving_lines) == 1
    assert serving_lines[0].endswith("operator API: on, at /api/admin")


@pytest.mark.parametrize(
    ("url", "described"),
    [
        (
            "redis://:hunter2@10.0.0.5:6380/2?prefix=app",
            "Redis redis://10.0.0.5:6380/2, prefix 'app'",
        ),
        (
            "rediss://me:hunter2@cache.example/0",
            "Redis rediss://cache.example:6379/0, prefix 'thinwire'",
        ),
        (
            "unix://:hunter2@/run/redis.sock",
            "Redis unix:///run/redis.sock?db=0, prefix 'thinwire'",
        ),
        (  # the query's other parameters are the client's, whatever their order
            "unix:///run/redis.sock?prefix=app&db=3",
            "Redis unix:///run/redis.sock?db=3, prefix 'app'",
        ),
    ],
)
def test_a_redis_store_is_described_without_its_credentials(url: str, described: str) -> None:
    pytest.importorskip("redis")
    from thinwire.stores import store_from_url

    store = store_from_url(url)
    assert store.describe() == described and "hunter2" not in store.describe()


@pytest.mark.parametrize(
    ("environment", "endpoint"),
    [
        ({}, OPENAI_ENDPOINT),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, "http://127.0.0.1:8080/v1"),
    ],
)
def test_the_demo_with_a_model_and_no_key_says_so_once(
    environment: dict[str, str],
    endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level("WARNING", logger="thinwire"):
        create_demo_app(data_dir=tmp_path, store=MemoryStore(), model="gpt-4.1-mini")
    assert [record.levelname for record in caplog.records] == ["WARNING"]
    assert caplog.messages[0].startswith(
        f"DemoChat answers with the model gpt-4.1-mini at {endpoint}, but no API key is set: "
        "every message will fail"
    )
    caplog.clear()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with caplog.at_level("WARNING", logger="thinwire"):
        create_demo_app(data_dir=tmp_path, store=MemoryStore(), model="gpt-4.1-mini")
        create_demo_app(data_dir=tmp_path, store=MemoryStore())  # scripted: no model at all
    assert not caplog.records


OPENAI_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")


@pytest.mark.parametrize(
    ("environment", "model", "line"),
    [
        (
            {},
            None,
            "the demo answers with the scripted agent (no --model, and no $OPENAI_MODEL, "
            "$OPENAI_BASE_URL or $OPENAI_API_KEY set)",
        ),
        (
            {"OPENAI_API_KEY": "sk-test"},
            None,
            f"the demo answers with the model gpt-4.1-mini at {OPENAI_ENDPOINT} "
            "($OPENAI_API_KEY is set)",
        ),
        (
            {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_API_KEY": "none"},
            None,
            "the demo answers with the model gpt-4.1-mini at http://127.0.0.1:8080/v1 "
            "($OPENAI_BASE_URL and $OPENAI_API_KEY are set)",
        ),
        (
            {"OPENAI_MODEL": "qwen3", "OPENAI_API_KEY": "none"},
            None,
            f"the demo answers with the model qwen3 at {OPENAI_ENDPOINT} ($OPENAI_MODEL is set)",
        ),
        (
            {"OPENAI_API_KEY": "sk-test"},
            "gpt-4o",
            f"the demo answers with the model gpt-4o at {OPENAI_ENDPOINT} (--model)",
        ),
    ],
)
def test_the_demo_says_which_agent_answers_and_why(
    environment: dict[str, str],
    model: str | None,
    line: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in OPENAI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with caplog.at_level("INFO", logger="thinwire.demo"):
        create_demo_app(data_dir=tmp_path, store=MemoryStore(), model=model)
    assert [r.getMessage() for r in caplog.records if r.name == "thinwire.demo"] == [line]


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"])
def test_the_demo_without_the_openai_sdk_answers_scripted_when_only_the_environment_asks(
    variable: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A key in the environment is common; the plain wheel has no openai SDK: a model
    that cannot load would fail every message, so the scripted agent answers, and one
    warning says what to install."""
    for name in OPENAI_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "gpt-4.1-nano" if variable == "OPENAI_MODEL" else "x")
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` fails
    with caplog.at_level("INFO", logger="thinwire"):
        app = create_demo_app(delay=0, data_dir=tmp_path, store=MemoryStore())
    wanted = "gpt-4.1-nano" if variable == "OPENAI_MODEL" else "gpt-4.1-mini"
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            f"${variable} is set, but the openai SDK is not installed: the demo answers with "
            f'the scripted agent, not the model {wanted} (pip install "thinwire[openai]")',
        )
    ]
    with TestClient(app) as client:
        assert client.get("/demo/about").json() == {"agent": "scripted", "model": None}
        frames = client.post("/agents/demo/runs", json={"message": {"text": "hi"}}).text
    assert "This is the start of our conversation." in frames


def test_the_demo_refuses_a_named_model_without_the_openai_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ValueError) as refused:
        create_demo_app(data_dir=tmp_path, store=MemoryStore(), model="gpt-4o")
    assert str(refused.value) == (
        'the demo\'s --model gpt-4o needs the openai SDK: pip install "thinwire[openai]"'
    )


@pytest.mark.anyio
async def test_shutdown_goes_on_without_a_run_that_ignores_its_cancellation(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Its agent catches every CancelledError: drain and shutdown each wait
    `CANCEL_GRACE` for it, not until it ends, and the log says so once."""
    monkeypatch.setattr(server_module, "CANCEL_GRACE", 0.05)
    started, released = asyncio.Event(), asyncio.Event()

    class Stubborn(Agent):
        async def run(self, run: Run, text: str) -> None:
            started.set()
            while not released.is_set():
                with contextlib.suppress(asyncio.CancelledError):
                    await released.wait()

    server = app_for({"stubborn": Stubborn}).state.thinwire
    await server.startup()
    await server.send("stubborn", "ada", None, "hold on")
    await started.wait()
    (run,) = server._runs.values()
    try:
        with caplog.at_level("WARNING", logger="thinwire"):
            await asyncio.wait_for(server.drain(0.01), 5)
            await asyncio.wait_for(server.shutdown(), 5)
        assert not run.done()
    finally:
        released.set()
        await run  # it ends when it will
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert [message.split(" (")[0] for message in warnings] == [
        "1 run(s) ignored their cancellation"
    ]
