"""ChatAgent over the official openai SDK, against an OpenAI-compatible stub that replays
recorded chunk streams: streaming, tools, approvals, replay, stop, failures, usage."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import time
import warnings
from collections.abc import Iterator
from datetime import date
from typing import Annotated, Any, ClassVar

import openai
import pytest
from pydantic import Field
from starlette.testclient import TestClient

from conftest import app_for, decide, parse_sse, server_context, stop_over_websocket
from thinwire import Approval
from thinwire.agent import UNANSWERED
from thinwire.models import ChatAgent, ModelError, OpenAIChat, messages, tool
from thinwire.models import openai as openai_chat
from thinwire.models.tools import ToolWarning, tools_of
from thinwire.testing import free_port
from thinwire.testing.openai_stub import (
    Body,
    Fail,
    Garbage,
    OpenAIStub,
    Stream,
    error_event,
    finish,
    reasoning,
    text,
    tool_calls,
    unanswered_calls,
    usage,
)

SECRET_PROMPT = "tw-model-prompt-7d1e"
SECRET_OUTPUT = "tw-model-tool-output-5c2a"
SECRET_ARGUMENT = "tw-model-argument-91b0"
TOKEN = "model-operator-token"


@pytest.fixture
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub() as running:
        yield running


#: The HTTP clients the SDK can stream with: aiohttp (what OpenAIChat picks where it is
#: installed) and httpx (the SDK's default, and what OpenAIChat falls back to).
HTTP_CLIENTS = ["aiohttp", "httpx"]


def http_client(name: str) -> Any:
    return openai.DefaultAioHttpClient() if name == "aiohttp" else openai.DefaultAsyncHttpxClient()


def librarian(stub: OpenAIStub, http: str | None = None, **attributes: Any) -> type[ChatAgent]:
    """A five-line agent, the way the docs write it (built per test, for its stub); with
    `http`, streaming through that HTTP client."""
    options = {} if http is None else {"http_client": http_client(http)}

    class Librarian(ChatAgent):
        model = OpenAIChat("stub-model", base_url=stub.url, api_key="test", backoff=0.01, **options)
        system_prompt = f"You help people find books. {SECRET_PROMPT}"
        lent: ClassVar[list[str]] = []

        @tool
        async def search(
            self, query: Annotated[str, Field(description="Words to look for")], limit: int = 3
        ) -> list[str]:
            """Search the catalogue.

            Returns titles."""
            return [f"{query} {n} ({SECRET_OUTPUT})" for n in range(limit)]

        @tool(
            approval=lambda arguments: (
                Approval(f"Lend {arguments['title']}?") if arguments["until"].year > 2026 else None
            )
        )
        async def lend(self, title: str, until: date) -> str:
            """Lend a book until a date."""
            type(self).lent.append(f"{title} until {until.isoformat()}")
            return "lent"

    for name, value in attributes.items():
        setattr(Librarian, name, value)
    return Librarian


def client_for(agent: type[ChatAgent]) -> TestClient:
    return TestClient(app_for({"lib": agent}, operator_token=TOKEN))


def run(client: TestClient, text_: str, context_id: str | None = None) -> list[dict[str, Any]]:
    body: dict[str, Any] = {"message": {"text": text_}}
    if context_id:
        body["contextId"] = context_id
    response = client.post("/agents/lib/runs", json=body)
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


def deltas(frames: list[dict[str, Any]], kind: str) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == kind)


def test_content_and_reasoning_stream_as_tokens_and_thinking(stub: OpenAIStub) -> None:
    stub.push(
        Stream(
            [
                *reasoning("Looking ", 2),
                *reasoning("closer.", field_name="reasoning"),
                *text("Hello there!", 4),
                finish(),
                usage(12, 4),
            ]
        )
    )
    with client_for(librarian(stub)) as client:
        frames = run(client, "hi")
    assert deltas(frames, "thinking") == "Looking closer."
    assert deltas(frames, "token") == "Hello there!"
    assert frames[-1]["text"] == "Hello there!" and frames[-1]["stopReason"] == "end"
    sent = stub.requests[0]
    assert sent["model"] == "stub-model" and sent["stream"] is True
    assert sent["messages"] == [
        {"role": "system", "content": f"You help people find books. {SECRET_PROMPT}"},
        {"role": "user", "content": "hi"},
    ]


def test_tools_get_their_schema_from_the_signature_and_docstring(stub: OpenAIStub) -> None:
    stub.push(Stream(text("ok")))
    with client_for(librarian(stub)) as client:
        run(client, "hi")
    tools = {t["function"]["name"]: t["function"] for t in stub.requests[0]["tools"]}
    search = tools["search"]
    assert search["description"] == "Search the catalogue."
    assert search["parameters"]["required"] == ["query"]
    assert search["parameters"]["properties"]["query"]["description"] == "Words to look for"
    assert search["parameters"]["properties"]["limit"]["default"] == 3
    assert tools["lend"]["parameters"]["properties"]["until"]["format"] == "date"


def test_split_and_parallel_tool_calls_run_and_their_results_go_back(stub: OpenAIStub) -> None:
    calls = [
        ("call_a", "search", {"query": SECRET_ARGUMENT, "limit": 1}),
        ("call_b", "search", {"query": "tides", "limit": 2}),
    ]
    stub.push(
        Stream([*text("Let me look. "), *tool_calls(calls, pieces=4), finish("tool_calls")]),
        Stream([*text("Found them."), finish()]),
    )
    with client_for(librarian(stub)) as client:
        frames = run(client, "find two")
        context_id = frames[0]["contextId"]
        transcript = client.get(f"/agents/lib/contexts/{context_id}").text
    assert [f["name"] for f in frames if f["type"] == "tool_call"] == ["search", "search"]
    assert all(f["ok"] for f in frames if f["type"] == "tool_result")
    assert frames[-1]["text"] == "Let me look. Found them."
    second = stub.requests[1]["messages"]
    assert second[2]["role"] == "assistant" and second[2]["content"] == "Let me look. "
    assert [c["id"] for c in second[2]["tool_calls"]] == ["call_a", "call_b"]
    assert json.loads(second[2]["tool_calls"][0]["function"]["arguments"]) == calls[0][2]
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in second if m["role"] == "tool"}
    assert results["call_b"] == [f"tides {n} ({SECRET_OUTPUT})" for n in range(2)]
    # Arguments, outputs and the prompt stay on the server.
    for secret in (SECRET_PROMPT, SECRET_OUTPUT, SECRET_ARGUMENT):
        assert secret not in json.dumps(frames) and secret not in transcript


def test_invalid_arguments_go_back_to_the_model_as_the_tools_error(stub: OpenAIStub) -> None:
    stub.push(
        Stream(
            [
                *tool_calls(
                    [
                        ("c1", "search", {"limit": "many"}),
                        ("c2", "nope", {}),
                        ("c3", "search", "{not json"),
                    ]
                ),
                finish("tool_calls"),
            ]
        ),
        Stream(text("Sorry, let me fix that.")),
    )
    with client_for(librarian(stub)) as client:
        frames = run(client, "find")
    assert frames[-1]["stopReason"] == "end"
    results = [(f["name"], f["ok"]) for f in frames if f["type"] == "tool_result"]
    assert results == [("search", False), ("search", False)]  # "nope" is no tool: not shown
    errors = {
        m["tool_call_id"]: m["content"] for m in stub.requests[1]["messages"] if m["role"] == "tool"
    }
    assert "query: Field required" in errors["c1"] and "limit" in errors["c1"]
    assert "there is no tool 'nope'" in errors["c2"]
    assert errors["c3"] == "error: the arguments are not a JSON object"


def test_a_tool_the_model_invents_is_told_to_the_model_and_never_shown(stub: OpenAIStub) -> None:
    # The name is the model's own (a prompt injection's, maybe): only declared names are
    # shown, live and on the replay an approval makes.
    invented = "tw_invented_tool_4e7a"
    lend = ("c2", "lend", {"title": "Dune", "until": "2027-05-01"})
    stub.push(Stream(tool_calls([("c1", invented, {"query": "x"}), lend])), Stream(text("Lent.")))
    with client_for(librarian(stub)) as client:
        asked = run(client, "lend Dune")
        resumed = decide(client, asked, "approve", agent="lib")
        context_id = asked[0]["contextId"]
        transcript = client.get(f"/agents/lib/contexts/{context_id}").text
        history = server_context(client, context_id, "lib").history
    assert [f["type"] for f in asked if f["type"].startswith("tool_")] == []
    assert [(f["type"], f["name"]) for f in resumed if f["type"].startswith("tool_")] == [
        ("tool_call", "lend"),
        ("tool_result", "lend"),
    ]
    assert resumed[-1]["toolCalls"] == ["lend"]
    assert invented not in json.dumps(asked + resumed) and invented not in transcript
    # The model is told, under its call's id; the history keeps the call as the model made it.
    told = {
        m["tool_call_id"]: m["content"] for m in stub.requests[1]["messages"] if "tool_call_id" in m
    }
    assert told == {"c1": f"error: there is no tool {invented!r}", "c2": '"lent"'}
    records = [(m["callId"], m["name"], m["ok"]) for m in history if m["role"] == "tool"]
    assert records == [("c1", invented, False), ("c2", "lend", True)]


def test_arguments_that_are_not_a_json_object_never_run_the_tool(stub: OpenAIStub) -> None:
    # Read as {"text": …}, they once ran a tool that takes a `text`.
    noted: list[str] = []

    class Noting(librarian(stub)):  # type: ignore[misc, valid-type]
        @tool
        async def note(self, text: str) -> str:
            """Keep a note."""
            noted.append(text)
            return "noted"

    calls = [("c1", "note", "{not json"), ("c2", "note", "[1, 2]"), ("c3", "note", '"hi"')]
    stub.push(Stream([*tool_calls(calls), finish("tool_calls")]), Stream(text("Let me fix that.")))
    with client_for(Noting) as client:
        frames = run(client, "note it")
        history = server_context(client, frames[0]["contextId"], "lib").history
    assert noted == [] and [f["ok"] for f in frames if f["type"] == "tool_result"] == [False] * 3
    second = stub.requests[1]["messages"]
    errors = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert set(errors.values()) == {"error: the arguments are not a JSON object"}
    # The raw text stays on record, and the model is shown its calls as JSON it can take.
    records = [m for m in history if m["role"] == "tool"]
    assert [r["arguments"] for r in records] == [{"text": raw} for _, _, raw in calls]
    shown = [c["function"]["arguments"] for c in second[2]["tool_calls"]]
    assert [json.loads(a) for a in shown] == [{"text": raw} for _, _, raw in calls]


def test_a_tools_own_failure_is_logged_once_with_its_traceback_and_not_its_arguments(
    stub: OpenAIStub, caplog: pytest.LogCaptureFixture
) -> None:
    # The model is told the error; the developer, until now, was told nothing.
    caplog.set_level(logging.WARNING, "thinwire")

    class Failing(librarian(stub)):  # type: ignore[misc, valid-type]
        @tool
        async def broken(self, query: str) -> str:
            """Fail as a bug does."""
            raise RuntimeError("tw-tool-bug-3f9e")

        @tool
        async def odd(self, query: str) -> Any:
            """Answer what is not JSON."""
            return object()

        @tool(approval=Approval("Go on?"))
        async def confirm(self) -> str:
            """Ask a person first."""
            return "asked"

    stub.push(
        Stream(
            tool_calls(
                [
                    ("c1", "broken", {"query": SECRET_ARGUMENT}),
                    ("c2", "odd", {"query": SECRET_ARGUMENT}),
                    ("c3", "nope", {"query": SECRET_ARGUMENT}),
                    ("c4", "search", {"limit": "many"}),
                ]
            )
        ),
        Stream(tool_calls([("c5", "confirm", {})])),
        Stream(text("Done.")),
    )
    with client_for(Failing) as client:
        frames = run(client, "go")
        assert frames[-2]["type"] == "interrupt"
        resumed = decide(client, frames, "approve", agent="lib")  # replays c1-c4
    assert resumed[-1]["text"] == "Done."
    told = {
        m["tool_call_id"]: m["content"] for m in stub.requests[1]["messages"] if "tool_call_id" in m
    }
    assert told["c1"] == "error: tw-tool-bug-3f9e"
    assert told["c2"].startswith("error: Unable to serialize unknown type")
    logged = [r for r in caplog.records if r.name == "thinwire.models"]
    # The tools' own failures, each once (not again on the replay); the model's calls
    # that do not fit are the model's to hear, not a bug of the developer's.
    assert [r.levelname for r in logged] == ["WARNING", "WARNING"]
    for record, tool_name in zip(logged, ["broken", "odd"], strict=True):
        message = record.getMessage()
        assert repr(tool_name) in message and "Failing" in message
        assert frames[0]["contextId"] in message and frames[0]["runId"] in message
        assert record.exc_info is not None
    assert str(logged[0].exc_info[1]) == "tw-tool-bug-3f9e"  # type: ignore[index]
    assert "Unable to serialize" in str(logged[1].exc_info[1])  # type: ignore[index]
    assert "Traceback" in caplog.text and "tw-tool-bug-3f9e" in caplog.text
    assert SECRET_ARGUMENT not in caplog.text


@pytest.mark.parametrize("name", ["run", "call", "aclose", "check_class"])
def test_a_tool_method_that_would_hide_chat_agents_own_is_refused(name: str) -> None:
    async def method(self: Any, query: str) -> str:
        """Look it up."""
        return query

    with pytest.raises(TypeError, match=rf"^Hiding\.{name} is a tool, and hides ChatAgent\.{name}"):
        type("Hiding", (ChatAgent,), {name: tool(method)})
    # Under another name, the model may still see that one.
    renamed = type("Renamed", (ChatAgent,), {"lookup": tool(name=name)(method)})
    assert name in tools_of(renamed)


def test_two_tools_of_one_name_are_refused_when_the_class_is_made() -> None:
    with pytest.raises(TypeError, match=r"two tools named 'search': \S*Twice\.a and \S*Twice\.b"):

        class Twice(ChatAgent):
            @tool(name="search")
            async def a(self, query: str) -> str:
                """Search one way."""
                return query

            @tool(name="search")
            async def b(self, query: str) -> str:
                """Search another."""
                return query

    class Base(ChatAgent):
        @tool
        async def search(self, query: str) -> str:
            """Search the catalogue."""
            return query

    with pytest.raises(TypeError, match=r"'search': \S*Base\.search and \S*Renamed\.find"):

        class Renamed(Base):
            @tool(name="search")
            async def find(self, query: str) -> str:
                """Search elsewhere."""
                return query

    @tool(name="search")
    async def listed(query: str) -> str:
        """Search from a list."""
        return query

    with pytest.raises(TypeError, match=r"\S*Base\.search and \S*listed in Listed\.tools"):

        class Listed(Base):
            tools: ClassVar[list[Any]] = [listed]

    # A subclass's method of the same name is an override: its tool is the one.
    class Overriding(Base):
        @tool
        async def search(self, query: str) -> str:
            """Search the catalogue, better."""
            return query.upper()

    assert tools_of(Overriding)["search"].description == "Search the catalogue, better."
    assert list(tools_of(Overriding)) == ["search"]


def test_a_tool_the_model_is_told_too_little_about_warns_where_it_is_declared() -> None:
    with pytest.warns(ToolWarning) as warned:

        class Vague(ChatAgent):
            @tool
            async def search(self, query, limit: int = 3) -> str:  # type: ignore[no-untyped-def]
                """Search the catalogue."""
                return str(query)

            @tool(name="lookup")
            async def find(self, order: str, at) -> str:  # type: ignore[no-untyped-def]
                return order

    said = [str(w.message) for w in warned]
    assert len(said) == 2
    assert "tool 'search'" in said[0] and "type hint on query " in said[0]
    assert "docstring" not in said[0]
    assert "tool 'lookup'" in said[1] and "Vague.find" in said[1]
    assert "no docstring" in said[1] and "type hint on at " in said[1]
    # Pointed at the user's code, not thinwire's.
    assert {w.filename for w in warned} == {__file__}
    schema = tools_of(Vague)["lookup"].schema["function"]
    assert schema["description"] == "" and "type" not in schema["parameters"]["properties"]["at"]

    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Described(ChatAgent):
            @tool
            async def search(self, query: str, limit: int = 3) -> str:
                """Search the catalogue."""
                return query


def test_the_loop_stops_at_the_step_limit(stub: OpenAIStub) -> None:
    def again(step: int) -> Stream:
        call = (f"c{step}", "search", {"query": f"x{step}", "limit": 1})
        return Stream([*text(f"Step {step}. "), *tool_calls([call]), finish("tool_calls")])

    stub.push(*(again(step) for step in range(3)), Stream(text("Found x2.")))
    with client_for(librarian(stub, max_steps=3)) as client:
        frames = run(client, "loop")
        assert len(stub.requests) == 3 and frames[-1]["stopReason"] == "end"
        assert frames[-1]["text"] == "Step 0. Step 1. Step 2. "
        assert [f["ok"] for f in frames if f["type"] == "tool_result"] == [True] * 3
        run(client, "and?", frames[0]["contextId"])
    # The last step's results, which no model saw in that run, reach the next send's.
    shown = stub.requests[3]["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in shown[-3:]] == [
        ("assistant", None),
        ("tool", "c2"),
        ("user", None),
    ]
    assert json.loads(shown[-2]["content"]) == [f"x2 0 ({SECRET_OUTPUT})"]


def test_an_approval_decided_from_the_arguments_and_a_resume_that_calls_the_model_once_more(
    stub: OpenAIStub,
) -> None:
    agent = librarian(stub)
    agent.lent = []
    stub.push(
        Stream(
            [
                *text("Checking. "),
                *tool_calls([("c1", "lend", {"title": "Dune", "until": "2027-01-05"})]),
                finish("tool_calls"),
            ]
        ),
        Stream(text("Dune is yours.")),
    )
    with client_for(agent) as client:
        asked = run(client, "lend me Dune")
        interrupt = asked[-2]["interrupt"]
        assert interrupt["prompt"] == "Lend Dune?" and asked[-1]["stopReason"] == "interrupted"
        assert agent.lent == [] and len(stub.requests) == 1
        context_id = asked[0]["contextId"]
        resumed = client.post(
            f"/agents/lib/contexts/{context_id}/decisions",
            json={"interruptId": interrupt["interruptId"], "value": "approve"},
        )
        frames = parse_sse(resumed.text)
    assert frames[-1]["text"] == "Dune is yours." and frames[-1]["stopReason"] == "end"
    # The first model call was replayed from the checkpoint, not made again.
    assert len(stub.requests) == 2
    assert agent.lent == ["Dune until 2027-01-05"]  # validated to a date, run once


#: A conversation where the model made calls c1 and c2, and the user said something next:
#: each call answered before the user's message, as the chat API requires.
TWO_CALLS_ANSWERED = [
    ("user", None),
    ("assistant", None),
    ("tool", "c1"),
    ("tool", "c2"),
    ("user", None),
]


def test_a_stop_while_a_call_waits_for_approval_keeps_the_steps_before_it(
    stub: OpenAIStub,
) -> None:
    agent = librarian(stub)
    agent.lent = []
    stub.push(
        Stream(
            tool_calls(
                [
                    ("c1", "search", {"query": "Dune"}),
                    ("c2", "lend", {"title": "Dune", "until": "2027-01-05"}),
                ]
            )
        ),
        Stream(text("Not lent, then.")),
    )
    with client_for(agent) as client:
        asked = run(client, "find and lend Dune")
        context_id = asked[0]["contextId"]
        assert asked[-1]["stopReason"] == "interrupted"
        client.post(f"/agents/lib/contexts/{context_id}/stop")
        frames = run(client, "never mind", context_id)
    assert frames[-1]["text"] == "Not lent, then." and agent.lent == []
    sent = stub.requests[-1]["messages"]
    # The search it ran is the model's to read; the call that waited never got its answer.
    assert [(m["role"], m.get("tool_call_id")) for m in sent[1:]] == TWO_CALLS_ANSWERED
    assert SECRET_OUTPUT in sent[3]["content"]
    assert sent[4]["content"] == f"error: {UNANSWERED}"  # it did not run: no guess


def test_a_call_the_rule_does_not_gate_runs_without_asking(stub: OpenAIStub) -> None:
    agent = librarian(stub)
    agent.lent = []
    stub.push(
        Stream(tool_calls([("c1", "lend", {"title": "Emma", "until": "2026-12-24"})])),
        Stream(text("Done.")),
    )
    with client_for(agent) as client:
        frames = run(client, "lend Emma")
    assert frames[-1]["text"] == "Done." and agent.lent == ["Emma until 2026-12-24"]


def test_the_history_maps_to_chat_messages_and_a_window_bounds_it(stub: OpenAIStub) -> None:
    stub.push(
        Stream([*tool_calls([("c1", "search", {"query": "a", "limit": 1})]), finish("tool_calls")]),
        Stream(text("first answer")),
        Stream(text("second answer")),
        Stream(text("third answer")),
    )
    with client_for(librarian(stub, history_window=5)) as client:
        context_id = run(client, "one")[0]["contextId"]
        run(client, "two", context_id)
        run(client, "three", context_id)
    three = stub.requests[3]["messages"]
    # The system prompt, then whole turns only: "two" and its answer, "three".
    assert [(m["role"], m.get("content")) for m in three] == [
        ("system", f"You help people find books. {SECRET_PROMPT}"),
        ("user", "two"),
        ("assistant", "second answer"),
        ("user", "three"),
    ]
    two = stub.requests[2]["messages"]
    assert [m["role"] for m in two] == ["system", "user", "assistant", "tool", "assistant", "user"]


def test_a_reply_too_long_for_the_window_is_shown_in_brief_with_the_next_message(
    stub: OpenAIStub,
) -> None:
    # A run that ends at max_steps is a long turn; with a small window the next message
    # would show the model nothing of it. It sees the question and the reply, and which
    # tools ran, though not their arguments or results.
    search = {"query": "tides", "limit": 1}
    calls = [Stream(tool_calls([(f"c{n}", "search", search)])) for n in range(4)]
    stub.push(*calls, Stream(text("Shall I go on?")), Stream(text("Going on.")))
    agent = librarian(stub, history_window=6, max_steps=4)
    with client_for(agent) as client:
        first = run(client, "find tides")
        assert [f["name"] for f in first if f["type"] == "tool_result"] == ["search"] * 4
        run(client, "next", first[0]["contextId"])
        run(client, "more", first[0]["contextId"])
    # Within the run the window is no cap: the latest turn is always whole.
    assert len(stub.requests[3]["messages"]) == 1 + 1 + 3 * 2
    nxt = stub.requests[4]["messages"]
    assert [(m["role"], m.get("content")) for m in nxt[1:]] == [
        ("user", "find tides"),
        (
            "assistant",
            "[Left out for length: the tools it called, search (finished, 4 times), and what "
            "they returned.]",
        ),
        ("user", "next"),
    ]
    assert SECRET_OUTPUT not in json.dumps(nxt)
    # Only the turn before the latest is shown in brief; the one before it is left out.
    more = stub.requests[5]["messages"]
    assert [(m["role"], m.get("content")) for m in more[1:]] == [
        ("user", "next"),
        ("assistant", "Shall I go on?"),
        ("user", "more"),
    ]


def test_the_brief_of_a_long_turn_keeps_its_reply_and_fits_the_window_or_is_left_out() -> None:
    def call(id_: str, name: str) -> dict[str, Any]:
        return {"id": id_, "name": name, "arguments": {}}

    history = [
        {"role": "user", "content": "refund 7"},
        {"role": "assistant", "content": "Looking. ", "toolCalls": [call("a", "lookup")]},
        {"role": "tool", "callId": "a", "name": "lookup", "ok": True, "output": "x"},
        {"role": "assistant", "content": "", "toolCalls": [call("b", "refund"), call("c", "x")]},
        {"role": "tool", "callId": "b", "name": "refund", "ok": False, "error": "no"},
        {"role": "assistant", "content": "Looking. ", "stopReason": "end"},
        {"role": "user", "content": "and?"},
    ]
    chat = messages.to_chat_messages(history, window=3)
    assert chat == [
        {"role": "user", "content": "refund 7"},
        {
            "role": "assistant",
            "content": "Looking. \n\n[Left out for length: the tools it called, lookup "
            "(finished), refund (failed), x (did not finish), and what they returned.]",
        },
        {"role": "user", "content": "and?"},
    ]
    assert messages.to_chat_messages(history, window=2) == [chat[-1]]
    assert len(messages.to_chat_messages(history, window=7)) == 7  # whole: 3 calls answered


def test_the_window_counts_the_latest_turn_with_the_earlier_ones() -> None:
    # The window bounds what the model is sent, so the latest turn counts against it too:
    # an earlier turn is shown whole only when it fits with the latest one.
    def call(id_: str) -> dict[str, Any]:
        return {"id": id_, "name": "search", "arguments": {}}

    earlier = [
        {"role": "user", "content": "find tides"},
        {"role": "assistant", "content": "", "toolCalls": [call("a")]},
        {"role": "tool", "callId": "a", "name": "search", "ok": True, "output": ["x"]},
        {"role": "assistant", "content": "Found one."},
    ]
    latest = [
        {"role": "user", "content": "and moons?"},
        {"role": "assistant", "content": "", "toolCalls": [call("b")]},
        {"role": "tool", "callId": "b", "name": "search", "ok": True, "output": ["y"]},
    ]
    asked = [{"role": "system", "content": "Be brief."}, *earlier, latest[0]]
    # As models.md says: in a window of 6, the 4-message turn is whole with the question …
    assert len(messages.to_chat_messages(asked, window=6)) == 1 + 4 + 1
    history = [*asked, *latest[1:]]
    # … and with its tool call and result, 4 + 3 messages, it fits a window of 7 …
    fits = messages.to_chat_messages(history, window=7)
    assert [m["role"] for m in fits] == ["system", *(m["role"] for m in earlier + latest)]
    # … and in brief in a window of 6, though the earlier turn alone is 4 messages.
    briefed = messages.to_chat_messages(history, window=6)
    assert [(m["role"], m.get("content")) for m in briefed[:3]] == [
        ("system", "Be brief."),
        ("user", "find tides"),
        (
            "assistant",
            "Found one.\n\n[Left out for length: the tools it called, search (finished), "
            "and what they returned.]",
        ),
    ]
    assert len(briefed) == 1 + 2 + 3
    # The latest turn is whole however small the window.
    assert len(messages.to_chat_messages(history, window=1)) == 1 + 3


def test_a_stop_during_a_tool_leaves_a_conversation_the_model_still_takes(
    stub: OpenAIStub,
) -> None:
    # The chat API refuses a tool call without its answer (the stub too), so a stop while
    # a tool ran must not leave the call unanswered for every later send.
    class Slow(librarian(stub)):  # type: ignore[misc, valid-type]
        @tool
        async def wait(self) -> str:
            """Take a while."""
            await asyncio.sleep(30)
            return "never"

    stub.push(
        Stream(tool_calls([("c1", "search", {"query": "a"}), ("c2", "wait", {})])),
        Stream(text("Still here.")),
    )
    with client_for(Slow) as client:
        start, done = stop_over_websocket(client, "go", at="tool_call", agent="lib")
        assert done["stopReason"] == "stopped"
        frames = run(client, "again", start["contextId"])
    assert frames[-1]["text"] == "Still here." and frames[-1]["stopReason"] == "end"
    sent = stub.requests[-1]["messages"]
    assert [(m["role"], m.get("tool_call_id")) for m in sent[1:]] == TWO_CALLS_ANSWERED
    assert sent[4]["content"].startswith("error: the run ended before this call returned")


def test_an_empty_answer_leaves_a_conversation_the_model_still_takes(stub: OpenAIStub) -> None:
    # A model may answer nothing (a filter, a length cut at once); the chat API refuses an
    # assistant message with neither content nor tool calls, so it is not shown again.
    stub.push(Stream([finish("content_filter")]), Stream(text("Hello again.")))
    with client_for(librarian(stub)) as client:
        first = run(client, "hi")
        assert first[-1]["text"] == "" and first[-1]["stopReason"] == "end"
        frames = run(client, "again", first[0]["contextId"])
    assert frames[-1]["text"] == "Hello again."
    assert [m["role"] for m in stub.requests[-1]["messages"]] == ["system", "user", "user"]


def test_an_agents_own_note_without_a_role_is_not_the_models_to_read() -> None:
    # run.history takes any JSON object: a note of the agent's must not break every send.
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"note": "greeted", "at": 1},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "again"},
    ]
    chat = messages.to_chat_messages(history, window=50)
    assert [(m["role"], m["content"]) for m in chat] == [
        ("system", "Be brief."),
        ("user", "hi"),
        ("assistant", "Hello."),
        ("user", "again"),
    ]


def test_the_tools_a_reply_cut_off_by_a_killed_server_called_are_told_to_the_model() -> None:
    # Their records went with the process; the reply's summary still names them, so the
    # model does not take a charge that went through for one that never happened.
    history = [
        {"role": "user", "content": "buy it"},
        {
            "role": "assistant",
            "content": "Charging. ",
            "stopReason": "interrupted",
            "calls": [{"name": "charge_card", "ok": True}, {"name": "ship", "ok": None}],
        },
        {"role": "user", "content": "did it work?"},
    ]
    chat = messages.to_chat_messages(history, window=50)
    assert [m["role"] for m in chat] == ["user", "assistant", "user"]
    assert chat[1]["content"] == (
        "Charging. \n\n[The server went down during this reply. It had called: charge_card "
        "(finished), ship (did not finish); what they returned was not kept.]"
    )
    # A reply cut off before it said anything: the note alone, no blank lines before it.
    silent = [history[0], {**history[1], "content": ""}, history[2]]
    assert messages.to_chat_messages(silent, window=50)[1]["content"] == (
        "[The server went down during this reply. It had called: charge_card (finished), "
        "ship (did not finish); what they returned was not kept.]"
    )


def test_the_pages_data_is_a_note_after_the_message_or_alone() -> None:
    data = {"page": "/orders/7"}
    note = '[The page sent this with the message: {"page": "/orders/7"}]'
    said = messages.chat_message({"role": "user", "content": "this one", "data": data})
    assert said["content"] == f"this one\n\n{note}"
    assert messages.chat_message({"role": "user", "content": "", "data": data})["content"] == note


def test_every_tool_call_is_answered_before_the_next_message() -> None:
    def call(id_: str) -> dict[str, Any]:
        return {"id": id_, "type": "function", "function": {"name": "f", "arguments": "{}"}}

    chat = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
        {"role": "tool", "tool_call_id": "z", "content": "a result without its call"},
        {"role": "assistant", "content": None, "tool_calls": [call("c")]},
    ]
    settled = messages.answered(chat)
    assert [(m["role"], m.get("tool_call_id")) for m in settled] == [
        ("user", None),
        ("assistant", None),
        ("tool", "b"),
        ("tool", "a"),
        ("assistant", None),
        ("tool", "c"),
    ]
    assert unanswered_calls(settled) == [] and unanswered_calls(chat) == ["a", "c"]


def test_openai_chat_streams_through_aiohttp_where_it_is_installed() -> None:
    assert "Aio" in type(OpenAIChat("m", api_key="k").client._client).__name__
    given = OpenAIChat("m", api_key="k", http_client=http_client("httpx")).client._client
    assert isinstance(given, openai.DefaultAsyncHttpxClient)


async def closing_server(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    opened: list[asyncio.Task[Any]],
    encoding: str = "identity",
) -> None:
    """A model's server that answers a connection's first request (its body gzipped,
    with `encoding="gzip"`) and closes it when a second one comes: a keep-alive
    connection closed as the client reuses it."""
    opened.append(asyncio.current_task())  # type: ignore[arg-type]
    body = (
        b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    )
    if encoding == "gzip":
        body = gzip.compress(body)
    for answered in range(2):
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            break  # the client closed the connection
        length = next(
            int(line.split(b":")[1])
            for line in head.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        await reader.readexactly(length)
        if answered:
            break
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-encoding: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (encoding.encode(), len(body), body)
        )
        await writer.drain()
    writer.close()


async def calls(
    opened: list[asyncio.Task[Any]], count: int, http: str | None = None, encoding: str = "identity"
) -> list[str]:
    """`count` calls of an OpenAIChat (through `http`, or its own choice of client) to a
    `closing_server`, 0.4 s apart; what each answered."""
    server = await asyncio.start_server(
        lambda r, w: closing_server(r, w, opened, encoding), "127.0.0.1", 0
    )
    port = server.sockets[0].getsockname()[1]
    options = {} if http is None else {"http_client": http_client(http)}
    model = OpenAIChat(
        "m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", retries=0, **options
    )
    replies = []
    try:
        for n in range(count):
            if n:
                await asyncio.sleep(0.4)
            turn = await model.complete([{"role": "user", "content": "hi"}], [], Said())
            replies.append(turn["content"])
    finally:
        await model.aclose()
        server.close()
        await asyncio.wait_for(asyncio.gather(*opened), 5)  # each saw its connection go
    return replies


def test_a_connection_idle_for_a_while_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers close idle connections (uvicorn after 5 s): the aiohttp client drops its
    own first, so no request goes out on one the server is closing."""
    monkeypatch.setattr(openai_chat, "KEEPALIVE_S", 0.2)
    opened: list[asyncio.Task[Any]] = []
    replies = asyncio.run(calls(opened, 2))
    assert replies == ["hi", "hi"]
    assert len(opened) == 2  # the second call on a connection of its own


@pytest.mark.parametrize("http", HTTP_CLIENTS)
def test_a_compressed_stream_is_decoded(http: str) -> None:
    assert asyncio.run(calls([], 1, http, "gzip")) == ["hi"]


class Said:
    async def say(self, delta: str) -> None:
        pass

    async def think(self, delta: str) -> None:
        pass


@pytest.mark.parametrize("http", HTTP_CLIENTS)
def test_a_stop_closes_the_request_to_the_model(stub: OpenAIStub, http: str) -> None:
    stub.push(Stream(text("This will go on and on", 5), delay=0.01, hold=True))
    with client_for(librarian(stub, http)) as client:
        _, frame = stop_over_websocket(client, "talk", at="token", agent="lib")
    assert frame["stopReason"] == "stopped"
    deadline = time.monotonic() + 5
    while stub.closed_early == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert stub.closed_early == 1  # the model's server saw the connection go


UPSTREAM = "secret-upstream-detail"
QUOTA_ERROR = {"error": {"message": UPSTREAM, "type": "insufficient_quota", "code": "quota"}}
WHOLE_COMPLETION = {
    "id": "chatcmpl-stub",
    "object": "chat.completion",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": UPSTREAM}}],
}


@pytest.mark.parametrize(
    ("replies", "reason", "retryable", "requests"),
    [
        ([Fail(401)], "refused the credentials", False, 1),
        ([Fail(429), Fail(429), Fail(429)], "rate limited", True, 3),
        ([Fail(503), Fail(500), Fail(502)], "server error 502", True, 3),
        ([Fail(400)], "refused the request (400)", False, 1),
        ([Stream(text("Half an ans", 2), cut_after=1)], "its stream broke off", True, 1),
        # Ended cleanly without a finish_reason: a proxy's timeout, not a whole answer.
        ([Stream(text("Half an ans", 2), unfinished=True)], "its stream broke off", True, 1),
        ([Stream([], unfinished=True)] * 3, "its stream broke off", True, 3),
        # A 200 that is no stream: a proxy's JSON error, a wrong base_url's page, a
        # completion not streamed.
        ([Body(QUOTA_ERROR)], "reported an error", False, 1),
        ([Body({"error": {"code": 429, "message": "slow down"}})] * 3, "rate limited", True, 3),
        ([Body(f"<html>{UPSTREAM}</html>", "text/html")], "sent a malformed answer", False, 1),
        ([Body(WHOLE_COMPLETION)], "sent a malformed answer", False, 1),
        ([Garbage(text("Half"))], "sent a malformed answer", False, 1),
        ([Stream([*text("Half"), error_event(code=429)])], "rate limited", True, 1),
        ([Stream([*text("Half"), error_event(code="503")])], "server error 503", True, 1),
        ([Stream([error_event(type="overloaded_error")])] * 3, "overloaded", True, 3),
        (
            [Stream([error_event(type="server_error", code="server_error")])] * 3,
            "server error",
            True,
            3,
        ),
        ([Stream([error_event("Rate limit reached")])] * 3, "rate limited", True, 3),
        ([Stream([error_event(type="invalid_request_error")])], "reported an error", False, 1),
        ([Stream(text("Too late"), delay=2.0)] * 3, "timed out", True, 3),
    ],
)
@pytest.mark.parametrize("http", HTTP_CLIENTS)
def test_upstream_failures_are_agent_errors_without_their_text(
    stub: OpenAIStub, replies: list[Any], reason: str, retryable: bool, requests: int, http: str
) -> None:
    stub.push(*replies)
    agent = librarian(stub, http)
    agent.model.client_options["timeout"] = 0.2  # before the client is made
    with client_for(agent) as client:
        frames = run(client, "hi")
    error = next(f for f in frames if f["type"] == "error")
    assert error["code"] == "agent_error" and error["retryable"] is retryable
    assert error["message"].startswith(f"The model failed ({reason})")
    assert "secret-upstream-detail" not in json.dumps(frames)
    assert frames[-1]["stopReason"] == "error" and len(stub.requests) == requests


@pytest.mark.parametrize("http", HTTP_CLIENTS)
def test_what_came_before_a_malformed_chunk_in_the_same_read_is_streamed_and_kept(
    stub: OpenAIStub, http: str
) -> None:
    stub.push(Garbage(text("abcdefgh", 2), together=True))
    with client_for(librarian(stub, http)) as client:
        frames = run(client, "hi")
        transcript = client.get(f"/agents/lib/contexts/{frames[0]['contextId']}").json()
    assert deltas(frames, "token") == "abcdefgh"
    error = next(f for f in frames if f["type"] == "error")
    assert error["message"].startswith("The model failed (sent a malformed answer)")
    assert frames[-1]["stopReason"] == "error" and frames[-1]["text"] == "abcdefgh"
    assert transcript["turns"][-1]["text"] == "abcdefgh"


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Body(QUOTA_ERROR), "reported an error"),
        (Body(f"<html>{UPSTREAM}</html>", "text/html"), "sent a malformed answer"),
        (Body(WHOLE_COMPLETION), "sent a malformed answer"),
    ],
)
def test_what_a_200_that_is_no_stream_said_is_in_the_log_only(
    stub: OpenAIStub, reply: Body, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    stub.push(reply)
    with caplog.at_level(logging.ERROR, logger="thinwire"), client_for(librarian(stub)) as client:
        frames = run(client, "hi")
    assert frames[-1]["stopReason"] == "error" and frames[-1]["text"] == ""
    assert f"The model failed ({reason})" in caplog.text
    assert UPSTREAM in caplog.text and UPSTREAM not in json.dumps(frames)


@pytest.mark.parametrize("http", HTTP_CLIENTS)
def test_a_tool_call_whose_stream_ended_unfinished_never_runs(stub: OpenAIStub, http: str) -> None:
    """Its arguments may be whole JSON and still not be all the model meant: the call is
    the model's only once it says it has finished. Nothing was shown, so it is asked again."""
    cut = tool_calls([("c1", "lend", {"title": "Emma", "until": "2026-12-24"})], pieces=3)
    stub.push(Stream(cut[:2], unfinished=True), Stream(cut[:3], unfinished=True))
    stub.push(Stream(text("Which book?")))
    agent = librarian(stub, http)
    agent.lent = []
    with client_for(agent) as client:
        frames = run(client, "lend me Emma")
    assert [f["type"] for f in frames if f["type"].startswith("tool")] == []
    assert agent.lent == [] and len(stub.requests) == 3
    assert frames[-1]["stopReason"] == "end" and frames[-1]["text"] == "Which book?"


def test_a_model_without_an_api_key_says_so_when_the_app_is_made_and_when_asked(
    stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    agent = librarian(stub)
    agent.model = OpenAIChat("stub-model", base_url=stub.url)
    sharing = type("Sharing", (agent,), {})  # its model, said once
    app = app_for({"lib": agent, "sharing": sharing}, operator_token=TOKEN)
    with caplog.at_level(logging.WARNING, logger="thinwire"), TestClient(app) as client:
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        frames = run(client, "hi")
    assert warned == [
        f"Librarian answers with the model stub-model at {stub.url}, but no API key is set: "
        "every message will fail (set $OPENAI_API_KEY, or api_key=; a local server that "
        "takes any key: OPENAI_API_KEY=none)"
    ]
    error = next(f for f in frames if f["type"] == "error")
    assert error["message"].startswith("The model failed (has no API key)")
    assert error["retryable"] is False and stub.requests == []
    caplog.clear()
    monkeypatch.setenv("OPENAI_API_KEY", "none")  # what a local server takes
    stub.push(Stream(text("Hello.")))
    with caplog.at_level(logging.WARNING, logger="thinwire"), client_for(agent) as client:
        assert run(client, "hi")[-1]["text"] == "Hello."
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_client_waits_two_minutes_for_a_chunk_unless_told_otherwise() -> None:
    default = OpenAIChat("m", api_key="k").client.timeout
    assert (default.connect, default.read, default.write, default.pool) == (5, 120, 120, 120)
    assert OpenAIChat("m", api_key="k", timeout=30).client.timeout == 30


@pytest.mark.parametrize("http", HTTP_CLIENTS)
def test_a_model_nobody_listens_for_is_unreachable(stub: OpenAIStub, http: str) -> None:
    agent = librarian(stub)
    url = f"http://127.0.0.1:{free_port()}/v1"
    agent.model = OpenAIChat(
        "m", base_url=url, api_key="test", backoff=0.01, http_client=http_client(http)
    )
    with client_for(agent) as client:
        frames = run(client, "hi")
    error = next(f for f in frames if f["type"] == "error")
    assert error["message"].startswith("The model failed (unreachable)")
    assert error["retryable"] is True and frames[-1]["stopReason"] == "error"


def test_a_failure_before_the_first_token_is_tried_again(stub: OpenAIStub) -> None:
    stub.push(Fail(429), Fail(503), Stream(text("third time lucky")))
    with client_for(librarian(stub)) as client:
        frames = run(client, "hi")
    assert frames[-1]["text"] == "third time lucky" and len(stub.requests) == 3


def test_token_usage_is_kept_for_the_operator_and_not_sent(stub: OpenAIStub) -> None:
    stub.push(
        Stream([*tool_calls([("c", "search", {"query": "q", "limit": 1})]), usage(100, 7)]),
        Stream([*text("done"), usage(130, 2)]),
    )
    with client_for(librarian(stub)) as client:
        frames = run(client, "hi")
        context_id = frames[0]["contextId"]
        transcript = client.get(f"/agents/lib/contexts/{context_id}").text
        seen = client.get(
            f"/admin/agents/lib/contexts/{context_id}/usage",
            headers={"authorization": f"Bearer {TOKEN}"},
        ).json()
    counts = {"calls": 2, "inputTokens": 230, "outputTokens": 9}
    assert seen["total"] == {"stub-model": counts}
    assert seen["runs"][0]["runId"] == frames[0]["runId"]
    assert "inputTokens" not in json.dumps(frames) + transcript


def test_a_stopped_run_counts_the_model_calls_it_finished_and_not_the_one_it_cut_short(
    stub: OpenAIStub,
) -> None:
    # The usage comes as the stream's last chunk, which a stopped call never reads.
    stub.push(
        Stream([*tool_calls([("c", "search", {"query": "q", "limit": 1})]), usage(100, 7)]),
        Stream([*text("This will go on and on", 5), usage(130, 9)], delay=0.01, hold=True),
    )
    with client_for(librarian(stub)) as client:
        start, done = stop_over_websocket(client, "talk", at="token", agent="lib")
        seen = client.get(
            f"/admin/agents/lib/contexts/{start['contextId']}/usage",
            headers={"authorization": f"Bearer {TOKEN}"},
        ).json()
    assert done["stopReason"] == "stopped"
    assert seen["total"] == {"stub-model": {"calls": 1, "inputTokens": 100, "outputTokens": 7}}


def test_an_agent_may_show_each_replys_model_and_tokens(stub: OpenAIStub) -> None:
    stub.push(Stream([*text("done"), usage(130, 2)]))
    with client_for(librarian(stub, public_usage=True)) as client:
        context_id = run(client, "hi")[0]["contextId"]
        reply = client.get(f"/agents/lib/contexts/{context_id}").json()["turns"][-1]
    assert reply["meta"]["model"] == "stub-model"
    assert reply["meta"]["usage"] == {"inputTokens": 130, "outputTokens": 2}


def test_the_event_reader_joins_data_lines_skips_comments_and_stops_at_done() -> None:
    from thinwire.models.openai import EventReader

    def read(chunks: list[bytes]) -> list[dict[str, Any]]:
        reader = EventReader()
        return [event for chunk in chunks for event in reader.feed(chunk)]

    stream = (
        b'data: {"a":\ndata: 1}\n\n: a comment\n\ndata:{}\n\ndata: [DONE]\n\ndata: {"n": 2}\n\n'
    )
    expected = [{"a": 1}, {}]
    assert read([stream]) == expected
    # Cut anywhere, a byte at a time, and with CRLF or CR line ends: the same events.
    for raw in (stream, stream.replace(b"\n", b"\r\n"), stream.replace(b"\n", b"\r")):
        assert read([raw[i : i + 1] for i in range(len(raw))]) == expected
        assert read([raw[:7], raw[7:30], raw[30:]]) == expected
    with pytest.raises(openai_chat.StreamError, match="reported an error"):
        read([b'data: {"error": {"message": "overloaded"}}\n\n'])
    # What a read holds before a bad event comes out before it fails.
    events = EventReader().feed(b'data: {"a": 1}\n\ndata: {not json\n\ndata: {}\n\n')
    assert next(events) == {"a": 1}
    with pytest.raises(ValueError):
        next(events)


class Scripted:
    """A ChatModel of the reader's own: it returns `turn`, whatever it is asked."""

    name = "scripted"

    def __init__(self, turn: Any) -> None:
        self.turn = turn

    async def complete(self, messages: Any, tools: Any, emit: Any) -> Any:
        return self.turn


def scripted(turn: Any) -> type[ChatAgent]:
    class Scripts(ChatAgent):
        model = Scripted(turn)

        @tool
        async def search(self, query: str) -> str:
            """Search."""
            return query

    return Scripts


def test_a_turn_that_leaves_out_usage_and_finish_reason_has_none() -> None:
    with client_for(scripted({"content": "hi", "toolCalls": []})) as client:
        frames = run(client, "hi")
        history = server_context(client, frames[0]["contextId"], "lib").history
    assert [f["type"] for f in frames[1:]] == ["done"] and frames[-1]["stopReason"] == "end"
    assert {"role": "assistant", "content": "hi"} in list(history)


ASKS = [{"id": "c1", "name": "search", "arguments": '{"query": "tides"}'}]


@pytest.mark.parametrize(
    ("turn", "complaint"),
    [
        ("hi", "returned a str, not a ModelTurn"),
        ({"toolCalls": []}, "returned a ModelTurn without content"),
        ({"content": None, "toolCalls": []}, "whose content is None, not a str"),
        ({"content": "hi", "toolCalls": None}, "whose toolCalls is None, not a list"),
        ({"content": "", "toolCalls": ["search"]}, "whose toolCalls[0] is a str, not an object"),
        (
            {"content": "", "toolCalls": [{**ASKS[0], "arguments": {"query": "tides"}}]},
            "whose toolCalls[0].arguments is a dict, not a str: the JSON text",
        ),
        (
            {"content": "", "toolCalls": [{"id": "c1", "name": "search"}]},
            "toolCalls[0] without arguments",
        ),
        (
            {"content": "", "toolCalls": [{**ASKS[0], "id": 1}]},
            "toolCalls[0].id is an int, not a str",
        ),
        ({"content": "hi", "toolCalls": [], "finishReason": 1}, "finishReason is an int"),
        (
            {"content": "hi", "toolCalls": [], "usage": {"input": 1, "output": 1}},
            'whose usage is not {"inputTokens": int, "outputTokens": int} or None',
        ),
        (
            {"content": "hi", "toolCalls": [], "usage": {"inputTokens": "1", "outputTokens": 1}},
            'whose usage is not {"inputTokens": int, "outputTokens": int} or None',
        ),
    ],
)
def test_a_malformed_turn_fails_the_run_naming_complete_and_the_field(
    turn: Any, complaint: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="thinwire"), client_for(scripted(turn)) as client:
        frames = run(client, "hi")
    assert frames[-2]["code"] == "agent_error" and frames[-2]["message"].startswith(
        "The agent failed."
    )
    [failure] = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert isinstance(failure, TypeError)
    assert str(failure).startswith("Scripted.complete() ") and complaint in str(failure), failure


class Fails:
    """A ChatModel of the reader's own that fails for `reason`."""

    name = "fails"

    def __init__(self, reason: Any) -> None:
        self.reason = reason

    async def complete(self, messages: Any, tools: Any, emit: Any) -> Any:
        raise ModelError(self.reason, retryable=True)


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        ("overloaded", "overloaded"),
        ("line1\nline2 \u202eevil\x00 " + "x" * 5000, "line1 line2 evil " + "x" * 82 + "…"),
        ("half \ud800 a pair", "half \ufffd a pair"),  # UTF-8 cannot carry a lone surrogate
        ("\u202e\n", None),
    ],
)
def test_a_model_errors_reason_reaches_the_client_as_one_short_plain_line(
    reason: str, shown: str | None
) -> None:
    class Failing(ChatAgent):
        model = Fails(reason)

    with client_for(Failing) as client:
        frames = run(client, "hi")
    error = next(f for f in frames if f["type"] == "error")
    said = "The model failed" if shown is None else f"The model failed ({shown})"
    assert error["message"].startswith(f"{said}. Reference: err-")
    assert error["retryable"] is True and frames[-1]["stopReason"] == "error"
