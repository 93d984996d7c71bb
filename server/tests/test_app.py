"""create_app refuses a misconfiguration with a sentence: when the app is made (a wrong
argument) or when it starts (a store that does not answer, an agent that cannot be made)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient, WebSocketDenialResponse

from conftest import app_for
from thinwire import Agent, MemoryStore, Run, SQLiteStore, anonymous, create_app
from thinwire.coordination import LocalCoordinator
from thinwire.demo import DemoAgent, create_demo_app
from thinwire.errors import Misconfigured
from thinwire.identity import SignedValue
from thinwire.models import ChatAgent, OpenAIChat


class Echo(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say(text)


# Agent classes each with one setting wrong: every conversation would fail on it.
class PlainRun(Agent):
    def run(self, run: Run, text: str) -> None:  # type: ignore[override]
        pass


class OneKeyName(Echo):
    writable_keys = "notes"  # type: ignore[assignment]


class KeysNotNames(Echo):
    writable_keys = frozenset({1})  # type: ignore[arg-type]


class StateNotJson(Echo):
    initial_state: ClassVar[dict[str, Any]] = {"internal_key_name": {1, 2}}


class StateKeyNotText(Echo):
    initial_state: ClassVar[dict[Any, Any]] = {1: "one"}


class StateKeyNotAName(Echo):
    initial_state: ClassVar[dict[str, Any]] = {"notes": [], "a/b": 1}


class ValueLimitOfZero(Echo):
    max_state_value_bytes = 0


class ValueLimitOfText(Echo):
    max_state_value_bytes: ClassVar[Any] = "1 MiB"


class StateNotMapping(Echo):
    initial_state: ClassVar[Any] = [("notes", [])]


class PromptNotText(Echo):
    system_prompt: ClassVar[Any] = ["You help."]


class WindowOfZero(Echo):
    history_window: ClassVar[Any] = 0


class WindowOfText(Echo):
    history_window: ClassVar[Any] = "50"


class NoModel(ChatAgent):
    pass


class ModelClass(ChatAgent):
    model = OpenAIChat  # type: ignore[assignment]


class NoSteps(ChatAgent):
    model = OpenAIChat("gpt-4.1-mini")
    max_steps = 0


class StepsText(ChatAgent):
    model = OpenAIChat("gpt-4.1-mini")
    max_steps = "10"  # type: ignore[assignment]


class ChatWindowOfZero(ChatAgent):
    model = OpenAIChat("gpt-4.1-mini")
    history_window = 0


class ChatWindowOfNone(ChatAgent):  # a chat model is never sent the whole conversation
    model = OpenAIChat("gpt-4.1-mini")
    history_window: ClassVar[Any] = None


class ChatWindowOfText(ChatAgent):
    model = OpenAIChat("gpt-4.1-mini")
    history_window: ClassVar[Any] = "50"


class ChatPromptNotText(ChatAgent):
    model = OpenAIChat("gpt-4.1-mini")
    system_prompt = None  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("agents", "options", "error", "says"),
    [
        ({"demo": Echo()}, {}, TypeError, "pass the class Echo"),
        ({}, {}, TypeError, "mapping of names"),
        ({"my agent": Echo}, {}, ValueError, "agent names"),
        # Taken, then unreachable: a URL resolves /agents/../runs to /runs.
        ({".": Echo}, {}, ValueError, r"other than \. and \.\. .*, not '\.'$"),
        ({"..": Echo}, {}, ValueError, r"other than \. and \.\. .*, not '\.\.'$"),
        ({"demo": "Echo"}, {}, TypeError, "Agent class or a function"),
        ({"demo": Echo}, {"identify": "anonymous"}, TypeError, "identify must be a function"),
        ({"demo": Echo}, {"identify": lambda: "ada"}, TypeError, "cannot be called with one"),
        ({"demo": Echo}, {"identify": lambda a, b: "ada"}, TypeError, "cannot be called with one"),
        ({"demo": Echo}, {"store": "sqlite:///x.db"}, TypeError, "thinwire Store"),
        ({"demo": Echo}, {"allowed_origins": "http://a.example"}, TypeError, "a list"),
        ({"demo": Echo}, {"allowed_origins": ["a.example"]}, ValueError, "scheme://host"),
        ({"demo": Echo}, {"cors": True}, ValueError, "needs allowed_origins"),
        ({"demo": Echo}, {"allowed_hosts": "a.example"}, TypeError, "a list"),
        ({"demo": Echo}, {"allowed_hosts": ["http://a.example"]}, ValueError, "a name"),
        # A class that is no Agent passed `callable`, then every request was a 500.
        (
            {"echo": int},
            {},
            TypeError,
            r"agents\['echo'\] must be an Agent class .* not the class int",
        ),
        # Each was taken, then every message failed (or wrote the wrong keys).
        ({"demo": PlainRun}, {}, TypeError, r"^PlainRun.run must be a coroutine function"),
        (
            {"demo": OneKeyName},
            {},
            TypeError,
            r"^OneKeyName.writable_keys must be a set of key names .* not the str 'notes'$",
        ),
        (
            {"demo": KeysNotNames},
            {},
            TypeError,
            r"^KeysNotNames.writable_keys must be .*, not a frozenset holding an int$",
        ),
        (
            {"demo": StateNotJson},
            {},
            TypeError,
            r"^StateNotJson.initial_state\['internal_key_name'\] is a set; it is copied into",
        ),
        ({"demo": StateKeyNotText}, {}, TypeError, "^StateKeyNotText.initial_state has a non-str"),
        (
            {"demo": StateKeyNotAName},
            {},
            ValueError,
            r"^StateKeyNotAName.initial_state key 'a/b' is not a key name: 1 to 128 of ",
        ),
        (
            {"demo": ValueLimitOfZero},
            {},
            ValueError,
            "^ValueLimitOfZero.max_state_value_bytes must be at least 1 \\(bytes\\), or None .*, not 0$",
        ),
        (
            {"demo": ValueLimitOfText},
            {},
            TypeError,
            "^ValueLimitOfText.max_state_value_bytes must be an int, .*, not '1 MiB'$",
        ),
        (
            {"demo": StateNotMapping},
            {},
            TypeError,
            "^StateNotMapping.initial_state must be a mapping of str to JSON values, not list$",
        ),
        ({"demo": PromptNotText}, {}, TypeError, "^PromptNotText.system_prompt must be a str"),
        (
            {"demo": WindowOfZero},
            {},
            ValueError,
            r"^WindowOfZero.history_window must be at least 1 \(exchanges\), or None .*, not 0$",
        ),
        (
            {"demo": WindowOfText},
            {},
            TypeError,
            "^WindowOfText.history_window must be an int, a number of exchanges, .*not '50'$",
        ),
        (
            {"demo": ChatWindowOfZero},
            {},
            ValueError,
            r"^ChatWindowOfZero.history_window must be at least 1 \(chat messages\), not 0$",
        ),
        (
            {"demo": ChatWindowOfNone},
            {},
            TypeError,
            "^ChatWindowOfNone.history_window must be an int, a number of chat messages, not None$",
        ),
        (
            {"demo": ChatWindowOfText},
            {},
            TypeError,
            "^ChatWindowOfText.history_window must be an int, a number of chat .*, not '50'$",
        ),
        ({"demo": NoModel}, {}, TypeError, r"^NoModel has no model: set model = OpenAIChat\("),
        (
            {"demo": ModelClass},
            {},
            TypeError,
            r"^ModelClass.model must be a chat model.* not the class OpenAIChat \(an instance",
        ),
        ({"demo": NoSteps}, {}, ValueError, "^NoSteps.max_steps must be an int of at least 1"),
        ({"demo": StepsText}, {}, TypeError, "^StepsText.max_steps must be an int, not str$"),
        (
            {"demo": ChatPromptNotText},
            {},
            TypeError,
            "^ChatPromptNotText.system_prompt must be a str, not NoneType$",
        ),
    ],
)
def test_a_wrong_argument_is_refused_when_the_app_is_made(
    agents: Any, options: dict[str, Any], error: type[Exception], says: str
) -> None:
    options.setdefault("identify", anonymous)
    with pytest.raises(error, match=says):
        create_app(agents, **options)


def test_an_initial_state_a_function_made_fails_as_the_servers_mistake(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A function making agents cannot be checked when the app is made: its agent's
    initial_state that is not JSON is the server's mistake, logged under a reference, a
    500 that names nothing of it — not the client's 400 naming a private key."""
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": lambda: StateNotJson()})) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "agent_error" and "internal_key_name" not in response.text
    reference = error["message"].rsplit(" ", 1)[-1].rstrip(".")
    logged = "\n".join(r.getMessage() + str(r.exc_info) for r in caplog.records)
    assert reference.startswith("err-") and reference in logged
    assert "starting a conversation with agent 'demo' failed" in logged
    assert "AgentState['internal_key_name'] is a set" in logged


def test_an_initial_state_key_of_a_functions_agent_fails_as_the_servers_mistake(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, "thinwire")
    with TestClient(app_for({"demo": lambda: StateKeyNotAName()})) as client:
        response = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "agent_error" and "a/b" not in response.text
    logged = "\n".join(str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    assert "StateKeyNotAName.initial_state key 'a/b' is not a key name" in logged


def test_a_chat_agent_with_no_model_closes_without_a_fault() -> None:
    """Shut down with a class the app did not check (a function's): nothing to close."""
    asyncio.run(NoModel.aclose())


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("parameter", "value", "error", "says"),
    [
        # Each was taken, and then every request was a 429, a 413 or a 500, or a stream broke.
        ("max_streams", -1, ValueError, "an int of at least 0 .*, not -1$"),
        ("max_streams", "32", TypeError, "an int, not str$"),
        ("max_runs", -1, ValueError, "an int of at least 0 .*, not -1$"),
        ("max_runs", True, TypeError, "an int, not bool$"),  # a bool is not a count
        ("run_burst", 0, ValueError, "an int of at least 1, not 0$"),
        ("run_burst", 2.5, TypeError, "an int, not float$"),
        ("max_message_bytes", 0, ValueError, "an int of at least 1, not 0$"),
        ("max_message_bytes", -5, ValueError, "an int of at least 1, not -5$"),
        ("max_message_bytes", "32k", TypeError, "an int, not str$"),
        ("max_contexts", "100", TypeError, "an int, not str$"),
        ("max_contexts", 0, ValueError, "an int of at least 1, not 0$"),
        ("max_contexts", -1, ValueError, "an int of at least 1, not -1$"),
        ("max_context_bytes", 0, ValueError, "an int of at least 1, not 0$"),
        ("max_data_bytes", -1, ValueError, "an int of at least 2 .*, not -1$"),
        ("max_body_bytes", 10, ValueError, r"of at least 53248 or None .*, not 10$"),
        ("max_body_bytes", -1, ValueError, r"of at least 53248 or None .*, not -1$"),
        ("max_body_bytes", 0, ValueError, r"of at least 53248 or None .*, not 0$"),
        ("heartbeat_interval", "15", TypeError, "a number or None, not str$"),
        ("heartbeat_interval", 0, ValueError, "a finite number above 0 or None, not 0$"),
        ("lease_ttl", -1, ValueError, "a finite number above 0, not -1$"),
        ("lease_ttl", INF, ValueError, "a finite number above 0, not inf$"),
        ("event_ttl", -1, ValueError, "a finite number above 0, not -1$"),
        ("send_timeout", 0, ValueError, "a finite number above 0, not 0$"),
        ("send_timeout", -1, ValueError, "a finite number above 0, not -1$"),
        ("runs_per_second", -1, ValueError, "a finite number of at least 0 .*, not -1$"),
        ("runs_per_second", NAN, ValueError, "a finite number of at least 0 .*, not nan$"),
        ("runs_per_second", "2", TypeError, "a number, not str$"),
        ("routes", [1], TypeError, r"\[0\] must be a Starlette route .*, not int$"),
        ("routes", Route("/x", lambda r: None), TypeError, "a list of routes, not one route"),
        ("web_dir", 5, TypeError, r"a directory's path \(a str or a Path\) or None, not int$"),
        ("coordinator", "redis://x", TypeError, "a thinwire Coordinator, not str$"),
        # An origin is compared with what a browser sends: anything more matches no page.
        ("allowed_origins", ["http://localhost:5173?x"], ValueError, "it has a query$"),
        ("allowed_origins", ["http://ada@localhost:5173"], ValueError, "it has a user name$"),
        ("allowed_origins", ["http://localhost:5173/app"], ValueError, "it has a path$"),
        ("allowed_origins", ["http://localhost:5173/#top"], ValueError, "it has a fragment$"),
        ("allowed_origins", ["ftp://localhost"], ValueError, "scheme://host.*'ftp://localhost'$"),
        (
            "allowed_origins",
            ["http://localhost:99999"],
            ValueError,
            "not 'http://localhost:99999'$",
        ),
        ("allowed_origins", [5173], TypeError, "a string, not int$"),
        # "false" read from the environment would have turned CORS on.
        ("cors", "false", TypeError, "True or False, not str$"),
        ("debug", 0, TypeError, "True or False, not int$"),
    ],
)
def test_a_wrong_limit_or_option_is_refused_naming_it_and_what_it_was_given(
    parameter: str, value: Any, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=says) as refused:
        create_app({"demo": Echo}, identify=anonymous, **{parameter: value})
    assert str(refused.value).startswith(parameter), refused.value


def test_every_default_and_documented_special_value_makes_an_app(tmp_path: Path) -> None:
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(create_app).parameters.items()
        if parameter.default is not inspect.Parameter.empty and name != "store"
    }
    server = app_for({"demo": Echo}, **defaults).state.thinwire
    assert server.max_body_bytes == 299_008  # deploy.md's number: 6 * (32 + 16) KiB + 4 KiB
    least_body = 32 * 1024 + 16 * 1024 + 4096
    specials: list[dict[str, Any]] = [
        {"max_streams": 0, "max_runs": 0},  # 0: no cap
        {"runs_per_second": 0, "run_burst": 1},  # 0: no rate limit
        {"runs_per_second": 2, "lease_ttl": 10, "event_ttl": 1, "send_timeout": 1},  # ints too
        {"heartbeat_interval": None},
        {"heartbeat_interval": 0.05, "send_timeout": 0.3},  # the tests' own
        {"max_contexts": 1, "max_context_bytes": 1, "max_message_bytes": 1, "max_data_bytes": 2},
        {"max_body_bytes": least_body},
        {"max_message_bytes": 10, "max_data_bytes": 2, "max_body_bytes": 10 + 2 + 4096},
        {"web_dir": str(tmp_path), "routes": [Route("/mine", lambda r: None)]},
        {"web_dir": tmp_path / "not built yet", "routes": ()},
        {"coordinator": LocalCoordinator()},
        {"allowed_origins": ["http://localhost:5173/", "http://[::1]:8000"], "cors": True},
    ]
    for options in specials:
        assert app_for({"demo": Echo}, **options).state.thinwire is not None, options
    assert app_for({"demo": Echo}, max_body_bytes=least_body).state.thinwire.max_body_bytes == (
        least_body
    )
    with pytest.raises(ValueError, match="max_body_bytes"):  # one byte short
        app_for({"demo": Echo}, max_body_bytes=least_body - 1)
    # A plain function that makes an agent is a factory, as a class is.
    assert app_for({"demo": lambda: Echo(), "other": DemoAgent}) is not None


def test_an_allowed_origin_is_compared_as_a_browser_spells_it() -> None:
    """Scheme and host in any case, a default port or a trailing slash: the same origin
    (RFC 6454), listed as the browser's `Origin` header will say it."""
    app = app_for(
        {"demo": Echo},
        allowed_origins=["HTTP://LocalHost:5173", "https://App.Example:443/"],
        cors=True,
    )
    assert sorted(app.state.thinwire.allowed_origins) == [
        "http://localhost:5173",
        "https://app.example",
    ]
    run = {"message": {"text": "hi"}}
    with TestClient(app) as client:
        for origin in ("http://localhost:5173", "https://app.example"):
            response = client.post("/agents/demo/runs", json=run, headers={"origin": origin})
            assert response.status_code == 200, (origin, response.text)
            assert response.headers["access-control-allow-origin"] == origin
            preflight = client.options(
                "/agents/demo/runs",
                headers={"origin": origin, "access-control-request-method": "POST"},
            )
            assert preflight.status_code == 200, origin
            with client.websocket_connect("/agents/demo/ws", headers={"origin": origin}):
                pass  # accepted at the handshake


def test_an_app_on_sqlite_starts_again_in_the_same_process(tmp_path: Path) -> None:
    """A test suite runs one module-level app's lifespan once per test."""
    app = create_app({"demo": DemoAgent}, identify=anonymous, store=SQLiteStore(tmp_path / "db"))
    with TestClient(app) as client:
        first = client.post("/agents/demo/runs", json={"message": {"text": "hi"}})
        context_id = first.text.split('"contextId":"')[1].split('"')[0]
    with TestClient(app) as client:  # the store closed, and opens again
        again = client.get(f"/agents/demo/contexts/{context_id}")
        assert again.status_code == 200 and again.json()["turns"][0]["text"] == "hi"


def test_startup_logs_which_replica_this_is(caplog: pytest.LogCaptureFixture) -> None:
    """A lease in the store names its replica: the log lets an operator find the process."""
    app = app_for({"demo": DemoAgent, "other": DemoAgent})
    with caplog.at_level("INFO", logger="thinwire"), TestClient(app):
        replica = app.state.thinwire.coordinator.replica_id
    assert any(line.startswith(f"serving demo, other as {replica}, ") for line in caplog.messages)


def test_an_agent_that_cannot_be_made_stops_the_app_from_starting() -> None:
    class Broken(Agent):
        def __init__(self) -> None:
            raise KeyError("OPENAI_API_KEY")

    with (
        pytest.raises(Misconfigured, match="'demo' cannot be created: KeyError"),
        TestClient(app_for({"demo": Broken})),
    ):
        pass


def test_a_store_that_does_not_answer_stops_the_app_from_starting(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("a file where a directory should be")
    store = SQLiteStore(tmp_path / "not-a-dir" / "thinwire.sqlite3")
    with (
        pytest.raises(Misconfigured, match="the store does not answer"),
        TestClient(app_for({"demo": DemoAgent}, store=store)),
    ):
        pass


def test_cors_answers_preflights_and_lets_the_listed_page_read() -> None:
    app = app_for({"demo": Echo}, allowed_origins=["http://localhost:5173"], cors=True)
    with TestClient(app) as client:
        preflight = client.options(
            "/agents/demo/runs",
            headers={
                "origin": "http://localhost:5173",
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type, thinwire-protocol, authorization",
            },
        )
        assert preflight.status_code == 200 and preflight.headers["thinwire-protocol"] == "1"
        assert preflight.headers["access-control-allow-origin"] == "http://localhost:5173"
        assert preflight.headers["access-control-allow-credentials"] == "true"
        response = client.post(
            "/agents/demo/runs",
            json={"message": {"text": "hi"}},
            headers={"origin": "http://localhost:5173"},
        )
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == "http://localhost:5173"
        assert "thinwire-protocol" in response.headers["access-control-expose-headers"].lower()
        assert "thinwire-heartbeat" in response.headers["access-control-expose-headers"].lower()
        other = client.options(
            "/agents/demo/runs",
            headers={"origin": "https://evil.example", "access-control-request-method": "POST"},
        )
        assert "access-control-allow-origin" not in other.headers
        # Refused as any request is: typed JSON, with its code.
        assert other.status_code == 403 and other.headers["thinwire-protocol"] == "1"
        for answer in (preflight, other):  # as every response: CORS answers them first
            assert answer.headers["x-content-type-options"] == "nosniff"
        assert other.json()["error"]["code"] == "origin_not_allowed"
        odd = client.options(
            "/agents/demo/runs",
            headers={"origin": "http://localhost:5173", "access-control-request-method": "PUT"},
        )
        assert odd.status_code == 400 and odd.json()["error"]["code"] == "invalid_request"
        assert "method" in odd.json()["error"]["message"]
        refused = client.post(
            "/agents/demo/runs",
            json={"message": {"text": "hi"}},
            headers={"origin": "https://evil.example"},
        )
        assert refused.status_code == 403
        assert "allowed_origins does not list its origin" in refused.json()["error"]["message"]


REBINDING = "rebind.attacker.example:8000"


def test_an_anonymous_app_answers_only_to_names_no_other_site_can_point_at_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS rebinding: a page at an attacker's name, pointed at this server's address,
    is same-origin with it by Host; an app that needs no credentials checks the Host."""
    with TestClient(app_for({"demo": Echo})) as client:
        refused = client.get("/agents/demo/contexts", headers={"host": REBINDING})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "host_not_allowed"
        assert refused.headers["x-content-type-options"] == "nosniff"  # as every answer
        sent = client.post(
            "/agents/demo/runs",
            json={"message": {"text": "hi"}},
            headers={"host": REBINDING, "origin": f"http://{REBINDING}"},
        )
        assert sent.status_code == 400
        with (
            pytest.raises(WebSocketDenialResponse) as denied,
            client.websocket_connect("/agents/demo/ws", headers={"host": REBINDING}),
        ):
            pass
        assert denied.value.status_code == 400
        assert denied.value.json()["error"]["code"] == "host_not_allowed"
        for host in ("127.0.0.1:8000", "localhost:5173", "[::1]:8000", "my-laptop", "a.localhost"):
            assert client.get("/agents/demo/contexts", headers={"host": host}).status_code == 200
    listed = app_for(
        {"demo": Echo},
        allowed_hosts=["agents.example.com", "*.example.org"],
        allowed_origins=["https://app.example.net:8443"],  # its host, too
    )
    with TestClient(listed) as client:
        for host in ("agents.example.com", "chat.example.org:443", "127.0.0.1", "app.example.net"):
            assert client.get("/agents/demo/contexts", headers={"host": host}).status_code == 200
        assert client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 400
    for app in (
        app_for({"demo": Echo}, allowed_hosts=["*"]),
        app_for({"demo": Echo}, identify=lambda c: "ada"),  # credentials: a rebinding page has none
    ):
        with TestClient(app) as client:
            assert (
                client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 200
            )
    # The demo's guest needs no credentials either; it answers to the names it is told.
    with TestClient(create_demo_app(data_dir=tmp_path)) as client:
        assert client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 400
        assert client.get("/agents/demo/contexts").status_code == 200
    monkeypatch.setenv("THINWIRE_ALLOWED_HOSTS", "demo.example.com,other.example.org")
    with TestClient(create_demo_app(data_dir=tmp_path)) as client:
        for host, status in (("demo.example.com", 200), ("other.example.org:8000", 200)):
            assert client.get("/agents/demo/contexts", headers={"host": host}).status_code == status
        assert client.get("/agents/demo/contexts", headers={"host": REBINDING}).status_code == 400


def test_allowed_hosts_keep_a_trailing_slash_redirect_to_the_names_listed() -> None:
    """Starlette redirects `…/contexts/` to `…/contexts` at the Host it was sent: an app
    that names its hosts (docs/security.md) sends no redirect to any other name."""

    def redirect(app: Any, host: str) -> Any:
        with TestClient(app) as client:
            return client.get(
                "/agents/demo/contexts/", headers={"host": host}, follow_redirects=False
            )

    def identify(connection: Any) -> str:
        return "ada"

    loose = redirect(app_for({"demo": Echo}, identify=identify), "evil.example")
    assert loose.headers["location"] == "http://evil.example/agents/demo/contexts"
    named = app_for({"demo": Echo}, identify=identify, allowed_hosts=["chat.example.com"])
    refused = redirect(named, "evil.example")
    assert refused.status_code == 400 and "location" not in refused.headers
    own = redirect(named, "chat.example.com")
    assert own.headers["location"] == "http://chat.example.com/agents/demo/contexts"
    # An address is still answered (no DNS points a site's name at it): the proxy in front
    # passes its own names only.
    address = redirect(named, "203.0.113.7")
    assert address.headers["location"] == "http://203.0.113.7/agents/demo/contexts"


def test_sqlite_errors_at_startup_name_the_cause(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")

    def unreadable(work: Any) -> Any:
        raise sqlite3.OperationalError("unable to open database file")

    store._database._read = unreadable  # type: ignore[method-assign]
    with (
        pytest.raises(Misconfigured, match="unable to open database file"),
        TestClient(app_for({"demo": DemoAgent}, store=store)),
    ):
        pass


def test_a_database_file_that_cannot_be_opened_is_named(tmp_path: Path) -> None:
    where = tmp_path / "a-directory-not-a-file"
    where.mkdir()
    with (
        pytest.raises(Misconfigured, match=f"cannot open {where}: unable to open database file"),
        TestClient(app_for({"demo": DemoAgent}, store=SQLiteStore(where))),
    ):
        pass


@pytest.mark.parametrize("value", ["ten", "0", "-1", "inf"])
def test_a_wrong_lease_ttl_in_the_environment_is_refused_naming_it(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The demo reads $THINWIRE_LEASE_TTL: the operator set that, not `lease_ttl`."""
    monkeypatch.setenv("THINWIRE_LEASE_TTL", value)
    with pytest.raises(
        ValueError,
        match=rf"^\$THINWIRE_LEASE_TTL must be a number of seconds above 0, not '{value}'$",
    ):
        create_demo_app(delay=0, data_dir=tmp_path, store=MemoryStore())


def test_a_short_demo_secret_is_refused_naming_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the operator token's: the operator reads which setting to change."""
    monkeypatch.delenv("THINWIRE_OPERATOR_TOKEN", raising=False)
    monkeypatch.setenv("THINWIRE_DEMO_SECRET", "short")
    with pytest.raises(
        ValueError, match=r"^\$THINWIRE_DEMO_SECRET must be at least 16 bytes, not 5"
    ):
        create_demo_app(delay=0, data_dir=tmp_path, store=MemoryStore())
    from thinwire import cli

    monkeypatch.setattr(cli, "run", lambda *a, **k: pytest.fail("served with a short secret"))
    with pytest.raises(SystemExit):
        cli.main(["demo", "--data-dir", str(tmp_path / "cli")])
    assert "error: $THINWIRE_DEMO_SECRET must be at least 16 bytes" in capsys.readouterr().err
    # The one the demo keeps in its data directory, made short by hand, is named too.
    monkeypatch.delenv("THINWIRE_DEMO_SECRET")
    (tmp_path / "demo-secret").write_text("abc\n")
    with pytest.raises(
        ValueError, match="^" + re.escape(f"the secret in {tmp_path / 'demo-secret'} must be")
    ):
        create_demo_app(delay=0, data_dir=tmp_path, store=MemoryStore())
    # SignedValue, used directly, says which secret in its own terms.
    with pytest.raises(
        ValueError, match=r"^SignedValue's secret must be at least 16 bytes, not 5$"
    ):
        SignedValue(b"short")
    with pytest.raises(TypeError, match=r"^SignedValue's secret must be bytes, not str$"):
        SignedValue("a long random secret, but a str")  # type: ignore[arg-type]
