"""PydanticAIAgent: a pydantic-ai agent served by thinwire, driven offline by pydantic-ai's
own FunctionModel: streaming, tools by name only, history in thinwire's store (also after
a restart), approvals as interrupts with a replay that does not ask the model again,
usage, and failures."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterable, AsyncIterator
from functools import partial
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai import ApprovalRequired, ModelRetry, NativeOutput, PromptedOutput, RunContext
from pydantic_ai.capabilities import ProcessEventStream
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaThinkingPart, DeltaToolCall, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import UsageLimits
from starlette.testclient import TestClient

from conftest import app_for, parse_sse, server_context, stop_over_websocket, tool_frames
from conftest import decide as decide_on
from conftest import send as send_to
from thinwire import Agent, Approval, MemoryStore, Run
from thinwire.models.pydantic_ai import PydanticAIAgent
from thinwire.testing.openai_stub import OpenAIStub, Stream, text

SECRET_INSTRUCTIONS = "tw-pai-instructions-3f9a"
SECRET_ARGUMENT = "tw-pai-argument-77c1"
SECRET_OUTPUT = "tw-pai-output-0b4e"
TOKEN = "pai-operator-token"

Reply = str | dict[int, DeltaToolCall] | dict[int, DeltaThinkingPart]
Piece = Reply | float  # a float: a pause, in seconds

send = partial(send_to, agent="support")
decide = partial(decide_on, agent="support")


class Script:
    """A FunctionModel's stream function that plays one scripted answer per request and
    remembers what each request showed the model."""

    def __init__(self, *answers: list[Piece]) -> None:
        self.answers = list(answers)
        self.requests: list[list[ModelMessage]] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Reply]:
        self.requests.append(list(messages))
        for piece in self.answers[len(self.requests) - 1]:
            if isinstance(piece, float):
                await asyncio.sleep(piece)
            else:
                yield piece

    def seen(self, request: int) -> str:
        """What the model was shown in a request, as text."""
        return repr(self.requests[request])


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[int, DeltaToolCall]:
    return {0: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=call_id)}


def support_agent(script: Script) -> tuple[type[PydanticAIAgent], dict[str, list[Any]]]:
    """The docs' five lines, around a pydantic-ai agent with a plain tool, a tool that
    needs approval, and one that decides itself whether it does."""
    ran: dict[str, list[Any]] = {"lookup": [], "refund": [], "cancel": []}
    support = PydanticAgent(
        FunctionModel(stream_function=script, model_name="scripted"),
        instructions=f"You help with orders. {SECRET_INSTRUCTIONS}",
    )

    @support.tool_plain
    async def lookup(order: str) -> dict[str, Any]:
        """Look an order up."""
        if order.startswith("slow"):
            await asyncio.sleep(0.05)
        ran["lookup"].append(order)
        if order == "retry":
            raise ModelRetry("orders are numbers")
        return {"order": order, "note": SECRET_OUTPUT}

    @support.tool_plain(requires_approval=True)
    def refund(order: str, amount: int) -> str:
        """Refund an order."""
        ran["refund"].append((order, amount))
        return "refunded"

    @support.tool
    def cancel(ctx: RunContext[None], order: str) -> str:
        """Cancel an order; big ones need a person."""
        if order.startswith("big") and not ctx.tool_call_approved:
            raise ApprovalRequired({"order": order})
        ran["cancel"].append(order)
        return "cancelled"

    class Support(PydanticAIAgent):
        agent = support

        def approval(self, call: Any, metadata: dict[str, Any] | None) -> Approval:
            if metadata:
                return Approval(f"Cancel {metadata['order']}?", metadata)
            return super().approval(call, metadata)

    return Support, ran


def deltas(frames: list[dict[str, Any]], kind: str) -> str:
    return "".join(f["delta"] for f in frames if f["type"] == kind)


def client_for(agent: type[PydanticAIAgent], store: MemoryStore | None = None) -> TestClient:
    app = app_for({"support": agent}, store=store or MemoryStore(), operator_token=TOKEN)
    return TestClient(app)


def test_text_and_thinking_stream_as_tokens_and_thinking_and_usage_is_kept() -> None:
    script = Script(
        [{0: DeltaThinkingPart(content="Checking ")}, {0: DeltaThinkingPart(content="orders.")}],
        ["Your order ", "is on ", "its way."],
    )
    agent, _ = support_agent(script)
    with client_for(agent) as client:
        frames = send(client, "where is my order?")
        context_id = frames[0]["contextId"]
        usage = client.get(
            f"/admin/agents/support/contexts/{context_id}/usage",
            headers={"authorization": f"Bearer {TOKEN}"},
        ).json()
    assert deltas(frames, "thinking") == "Checking orders."
    assert [f["delta"] for f in frames if f["type"] == "token"] == [
        "Your order ",
        "is on ",
        "its way.",
    ]
    assert frames[-1]["text"] == "Your order is on its way." and frames[-1]["stopReason"] == "end"
    # A thinking-only answer is not an output: pydantic-ai asked again, two model calls.
    assert len(script.requests) == 2
    [(model, counted)] = usage["total"].items()
    assert model == "scripted" and counted["calls"] == 2
    assert counted["inputTokens"] > 0 and counted["outputTokens"] > 0


def test_tools_cross_the_wire_by_name_only_and_their_record_stays_on_the_server() -> None:
    script = Script(
        ["Let me look. ", *[call("lookup", {"order": SECRET_ARGUMENT}, "c1")]],
        ["It is on its way."],
    )
    agent, ran = support_agent(script)
    with client_for(agent) as client:
        frames = send(client, "order?")
        context_id = frames[0]["contextId"]
        transcript = client.get(f"/agents/support/contexts/{context_id}").text
        history = server_context(client, context_id, "support").history
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", True)]
    assert frames[-1]["text"] == "Let me look. It is on its way."
    assert ran["lookup"] == [SECRET_ARGUMENT]
    public = json.dumps(frames) + transcript
    for secret in (SECRET_INSTRUCTIONS, SECRET_ARGUMENT, SECRET_OUTPUT):
        assert secret not in public
    [record] = [m for m in history if m["role"] == "tool"]
    assert record["arguments"] == {"order": SECRET_ARGUMENT} and record["callId"] == "c1"
    assert record["output"] == {"order": SECRET_ARGUMENT, "note": SECRET_OUTPUT}
    # The model got the tool's output back, and the agent's messages are in the history.
    assert SECRET_OUTPUT in script.seen(1)
    [kept] = [m for m in history if m["role"] == "pydantic-ai"]
    assert [m["kind"] for m in kept["messages"]] == ["request", "response", "request", "response"]


def test_an_agent_that_handles_its_own_event_stream_still_streams_once() -> None:
    script = Script(["Let me look. ", *[call("lookup", {"order": "1"}, "c1")]], ["Found ", "it."])
    seen: list[str] = []

    async def handler(ctx: RunContext[None], events: AsyncIterable[Any]) -> None:
        seen.extend([type(event).__name__ async for event in events])

    streaming = PydanticAgent(
        FunctionModel(stream_function=script), capabilities=[ProcessEventStream(handler)]
    )

    @streaming.tool_plain
    def lookup(order: str) -> str:
        return "on its way"

    class Streaming(PydanticAIAgent):
        agent = streaming

    with client_for(Streaming) as client:
        frames = send(client, "where?")
    assert [f["delta"] for f in frames if f["type"] == "token"] == [
        "Let me look. ",
        "Found ",
        "it.",
    ]
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", True)]
    # The handler saw the recorded responses (streamed through pydantic-ai's own stream).
    assert seen.count("FunctionToolResultEvent") == 1 and seen.count("FinalResultEvent") == 2


def test_a_second_message_sees_the_first_also_after_a_restart() -> None:
    script = Script(["Hello Ada."], ["You are Ada."], ["Still Ada."])
    agent, _ = support_agent(script)
    store = MemoryStore()
    with client_for(agent, store) as client:
        context_id = send(client, "I am Ada")[0]["contextId"]
        send(client, "who am I?", context_id)
    with client_for(agent, store) as client:  # a fresh registry over the same store
        frames = send(client, "and now?", context_id)
    assert frames[-1]["text"] == "Still Ada."
    for request in (1, 2):
        assert "I am Ada" in script.seen(request) and "Hello Ada." in script.seen(request)
    assert "You are Ada." in script.seen(2)
    prompts = [
        part.content
        for message in script.requests[2]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]
    assert prompts == ["I am Ada", "who am I?", "and now?"]


def test_an_approval_suspends_and_the_decision_resumes_without_asking_the_model_again() -> None:
    script = Script(
        ["Checking. ", *[call("lookup", {"order": "1234"}, "c1")]],
        [call("refund", {"order": "1234", "amount": 40}, "c2")],
        ["Refunded."],
    )
    agent, ran = support_agent(script)
    store = MemoryStore()
    with client_for(agent, store) as client:
        asked = send(client, "refund 1234")
    assert asked[-1]["stopReason"] == "interrupted"
    assert asked[-2]["interrupt"]["prompt"] == "Allow refund?"
    assert asked[-2]["interrupt"]["options"] == ["approve", "reject"]
    assert asked[-2]["interrupt"]["payload"] is None  # the arguments stay private
    assert ran == {"lookup": ["1234"], "refund": [], "cancel": []}
    assert len(script.requests) == 2
    with client_for(agent, store) as client:  # decided after a restart
        resumed = decide(client, asked, "approve")
    assert resumed[-1]["text"] == "Refunded." and resumed[-1]["stopReason"] == "end"
    assert tool_frames(resumed) == [("tool_call", "refund", None), ("tool_result", "refund", True)]
    # Both model calls and the lookup were replayed from the journal, not done again.
    assert len(script.requests) == 3
    assert ran == {"lookup": ["1234"], "refund": [("1234", 40)], "cancel": []}
    returns = [
        part.tool_name
        for message in script.requests[2]
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert returns == ["lookup", "refund"]


def test_a_stop_while_an_approval_waits_keeps_what_the_run_finished() -> None:
    script = Script(
        ["Checking. ", *[call("lookup", {"order": "1234"}, "c1")]],
        [call("refund", {"order": "1234", "amount": 40}, "c2")],
        ["No refund, then."],
    )
    agent, ran = support_agent(script)
    with client_for(agent) as client:
        asked = send(client, "refund 1234")
        context_id = asked[0]["contextId"]
        client.post(f"/agents/support/contexts/{context_id}/stop")
        frames = send(client, "never mind", context_id)
    assert frames[-1]["text"] == "No refund, then."
    assert ran == {"lookup": ["1234"], "refund": [], "cancel": []}
    # The lookup it finished is the model's to read; the refund that waited is not.
    assert SECRET_OUTPUT in script.seen(2) and "never mind" in script.seen(2)
    assert "refund" not in [
        part.tool_name
        for message in script.requests[2]
        for part in message.parts
        if isinstance(part, ToolReturnPart | ToolCallPart)
    ]


def test_parallel_calls_run_in_the_models_order_so_a_replay_meets_them_in_that_order() -> None:
    calls = {
        0: DeltaToolCall("lookup", '{"order": "slow-1"}', tool_call_id="c1"),
        1: DeltaToolCall("lookup", '{"order": "2"}', tool_call_id="c2"),
        2: DeltaToolCall("refund", '{"order": "2", "amount": 5}', tool_call_id="c3"),
    }
    script = Script([calls], ["Done."])
    agent, ran = support_agent(script)
    with client_for(agent) as client:
        asked = send(client, "refund 2")
        resumed = decide(client, asked, "approve")
    assert [f["name"] for f in asked if f["type"] == "tool_call"] == ["lookup", "lookup"]
    assert resumed[-1]["text"] == "Done." and len(script.requests) == 2
    assert ran["lookup"] == ["slow-1", "2"] and ran["refund"] == [("2", 5)]


def test_a_rejection_reaches_the_model_as_pydantic_ais_denial() -> None:
    script = Script([call("refund", {"order": "9", "amount": 5}, "c1")], ["Okay, no refund."])
    agent, ran = support_agent(script)
    with client_for(agent) as client:
        asked = send(client, "refund 9")
        resumed = decide(client, asked, "reject")
        history = server_context(client, asked[0]["contextId"], "support").history
    assert resumed[-1]["text"] == "Okay, no refund." and ran["refund"] == []
    assert "The tool call was denied." in script.seen(1)
    [record] = [m for m in history if m["role"] == "tool"]
    assert record["name"] == "refund" and record["ok"] is False


def test_a_tool_that_asks_itself_and_a_retry_replay_as_they_happened() -> None:
    script = Script(
        [call("lookup", {"order": "retry"}, "c1")],
        [call("lookup", {"order": "7"}, "c2")],
        [call("cancel", {"order": "big-7"}, "c3")],
        ["Cancelled."],
    )
    agent, ran = support_agent(script)
    with client_for(agent) as client:
        asked = send(client, "cancel 7")
        request = asked[-2]["interrupt"]
        assert request["prompt"] == "Cancel big-7?" and request["payload"] == {"order": "big-7"}
        assert len(script.requests) == 3 and ran["lookup"] == ["retry", "7"]
        resumed = decide(client, asked, "approve")
        history = server_context(client, asked[0]["contextId"], "support").history
    assert resumed[-1]["text"] == "Cancelled."
    assert len(script.requests) == 4 and ran["lookup"] == ["retry", "7"]
    assert ran["cancel"] == ["big-7"]
    assert "orders are numbers" in script.seen(1)  # the retry, as pydantic-ai words it
    # The replayed run showed the model the same retry: the last request has it too.
    assert "orders are numbers" in script.seen(3)
    errors = [m.get("error") for m in history if m["role"] == "tool"]
    assert errors == [
        "ModelRetry: orders are numbers",
        None,
        'ApprovalRequired: {"order": "big-7"}',
        None,
    ]


def test_a_failed_run_keeps_what_it_finished_for_the_next_message() -> None:
    invalid = [call("refund", {"order": "1", "amount": "many"}, "c1")]
    script = Script(invalid, invalid, ["Hello again."])  # asked again once, then it fails
    agent, _ = support_agent(script)
    with client_for(agent) as client:
        failed = send(client, "refund everything")
        frames = send(client, "hello?", failed[0]["contextId"])
    assert failed[-1]["stopReason"] == "error"
    assert next(f for f in failed if f["type"] == "error")["code"] == "agent_error"
    assert frames[-1]["text"] == "Hello again."
    assert "refund everything" in script.seen(2)


def returned_to(request: list[ModelMessage]) -> list[tuple[str, str | None]]:
    """The calls a request showed the model, and the answers it gave it, by call id."""
    return [
        (type(part).__name__, part.tool_call_id)
        for message in request
        for part in message.parts
        if isinstance(part, ToolCallPart | ToolReturnPart)
    ]


def test_a_run_that_fails_in_a_tool_keeps_the_calls_it_finished_with_their_results() -> None:
    calls = {
        0: DeltaToolCall("lookup", '{"order": "1"}', tool_call_id="c1"),
        1: DeltaToolCall("boom", "{}", tool_call_id="c2"),
    }
    script = Script(["Looking. ", calls], ["Order 1 is on its way."])
    agent, ran = support_agent(script)

    @agent.agent.tool_plain
    def boom() -> str:
        raise RuntimeError("the tool crashed")

    with client_for(agent) as client:
        failed = send(client, "where is order 1?")
        frames = send(client, "and?", failed[0]["contextId"])
    assert failed[-1]["stopReason"] == "error" and ran["lookup"] == ["1"]
    assert frames[-1]["text"] == "Order 1 is on its way."
    # The lookup it finished, and its result; not the call that crashed the run.
    assert returned_to(script.requests[1]) == [("ToolCallPart", "c1"), ("ToolReturnPart", "c1")]
    assert SECRET_OUTPUT in script.seen(1) and "Looking. " in script.seen(1)


def test_a_stop_while_an_approval_waits_keeps_the_calls_of_its_message_that_ran() -> None:
    # pydantic-ai runs the calls that need no approval before it asks about the others.
    calls = {
        0: DeltaToolCall("lookup", '{"order": "1"}', tool_call_id="c1"),
        1: DeltaToolCall("refund", '{"order": "1", "amount": 5}', tool_call_id="c2"),
        2: DeltaToolCall("lookup", '{"order": "2"}', tool_call_id="c3"),
    }
    script = Script([calls], ["No refund, then."])
    agent, ran = support_agent(script)
    with client_for(agent) as client:
        asked = send(client, "refund 1")
        assert [f["name"] for f in asked if f["type"] == "tool_call"] == ["lookup", "lookup"]
        client.post(f"/agents/support/contexts/{asked[0]['contextId']}/stop")
        frames = send(client, "never mind", asked[0]["contextId"])
    assert frames[-1]["text"] == "No refund, then." and ran["refund"] == []
    assert returned_to(script.requests[1]) == [
        ("ToolCallPart", "c1"),
        ("ToolCallPart", "c3"),
        ("ToolReturnPart", "c1"),
        ("ToolReturnPart", "c3"),
    ]


def test_a_prompt_a_failed_run_left_unanswered_is_read_with_the_next() -> None:
    class Down(Script):  # the model fails its first request, before saying anything
        async def __call__(
            self, messages: list[ModelMessage], info: AgentInfo
        ) -> AsyncIterator[Reply]:
            if not self.requests:
                self.requests.append(list(messages))
                raise RuntimeError("the model is down")
            async for piece in super().__call__(messages, info):
                yield piece

    script = Down([], ["Both answered."])
    agent, _ = support_agent(script)
    with client_for(agent) as client:
        failed = send(client, "first question")
        frames = send(client, "second question", failed[0]["contextId"])
    assert failed[-1]["stopReason"] == "error" and frames[-1]["text"] == "Both answered."
    # As models.md says: several user prompts in a row, the unanswered one first.
    [request] = script.requests[1]
    assert isinstance(request, ModelRequest)
    prompts = [p.content for p in request.parts if isinstance(p, UserPromptPart)]
    assert prompts == ["first question", "second question"]


def test_a_stopped_run_leaves_what_the_model_said_for_the_next_message() -> None:
    script = Script(["The first part. ", 30.0, "Never said."], ["Going on."])
    agent, _ = support_agent(script)
    with client_for(agent) as client:
        start, frame = stop_over_websocket(client, "tell me", at="token", agent="support")
        frames = send(client, "go on", start["contextId"])
    assert frame["stopReason"] == "stopped" and frames[-1]["text"] == "Going on."
    assert "tell me" in script.seen(1) and "The first part. " in script.seen(1)
    assert "Never said." not in script.seen(1)


def test_a_stop_ends_the_run_at_once_while_a_sync_tool_runs_on_in_its_thread() -> None:
    """What models.md says: Python cannot stop a thread, so a plain-def tool runs to its
    end after the run has stopped; its result is dropped."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()
    script = Script([call("blocking", {"order": "1"}, "c1")], ["Going on."])
    support = PydanticAgent(FunctionModel(stream_function=script))

    @support.tool_plain
    def blocking(order: str) -> str:
        """Look an order up, blocking its thread."""
        started.set()
        release.wait(10)
        finished.set()
        return "late"

    class Support(PydanticAIAgent):
        agent = support

    with client_for(Support) as client:
        start, frame = stop_over_websocket(
            client, "order 1?", at="tool_call", agent="support", once=started
        )
        assert frame["stopReason"] == "stopped" and not finished.is_set()
        release.set()
        assert finished.wait(10)  # the tool ran on after the stop
        frames = send(client, "go on", start["contextId"])
    assert frames[-1]["text"] == "Going on." and "late" not in script.seen(1)


def test_a_chat_completions_server_takes_openai_chat_models_not_openai_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As models.md says: `openai:` is the Responses API, which a server of chat
    # completions only (the stub, like many OpenAI-compatible ones) answers 404.
    with OpenAIStub() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        stub.push(Stream(text("Hello.")))

        class Chat(PydanticAIAgent):
            agent = PydanticAgent("openai-chat:stub-model")

        class Responses(PydanticAIAgent):
            agent = PydanticAgent("openai:stub-model")

        with TestClient(app_for({"chat": Chat, "responses": Responses})) as client:
            answered = send_to(client, "hi", agent="chat")
            failed = send_to(client, "hi", agent="responses")
            for served in (Chat, Responses):  # their connections, while their loop runs
                model: Any = served.agent.model
                assert client.portal is not None
                client.portal.call(model.client.close)
    assert answered[-1]["text"] == "Hello." and len(stub.requests) == 1
    assert failed[-1]["stopReason"] == "error"
    error = next(f for f in failed if f["type"] == "error")
    assert error["code"] == "agent_error" and error["message"].startswith("The agent failed.")


class NoAgent(PydanticAIAgent):
    pass


class AgentClass(PydanticAIAgent):
    agent = PydanticAgent  # type: ignore[assignment]  # the class, not an agent


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        (NoAgent, r"^NoAgent has no agent: set agent = Agent\("),
        (AgentClass, r"^AgentClass\.agent must be a pydantic-ai agent .*not the class Agent "),
    ],
)
def test_a_wrong_agent_is_refused_when_the_app_is_made(agent: type, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        app_for({"support": agent})


def test_a_tool_the_model_invents_is_told_to_the_model_and_never_shown() -> None:
    invented = "tw_invented_tool_4e7a"
    script = Script([*[call(invented, {"order": "1"}, "c1")]], ["Sorry."])
    agent, _ = support_agent(script)
    with client_for(agent) as client:
        frames = send(client, "order?")
        transcript = client.get(f"/agents/support/contexts/{frames[0]['contextId']}").text
    assert tool_frames(frames) == [] and frames[-1]["toolCalls"] == []
    assert invented not in json.dumps(frames) and invented not in transcript
    assert f"Unknown tool name: {invented!r}" in script.seen(1)  # pydantic-ai's retry prompt


class Order(BaseModel):
    order_id: str


def reply_of(client: TestClient, frames: list[dict[str, Any]]) -> str:
    """The reply the transcript keeps of a run."""
    context_id = frames[0]["contextId"]
    turns = client.get(f"/agents/support/contexts/{context_id}").json()["turns"]
    text: str = turns[-1]["text"]
    return text


def served(agent: PydanticAgent[Any, Any]) -> type[PydanticAIAgent]:
    class Served(PydanticAIAgent):
        pass

    Served.agent = agent
    return Served


@pytest.mark.parametrize("output", [PromptedOutput(Order), NativeOutput(Order)])
def test_a_structured_output_the_model_writes_as_text_is_said_once_as_json(output: Any) -> None:
    script = Script(['{"order_id": ', '"B2"}'])
    agent = PydanticAgent(FunctionModel(stream_function=script), output_type=output)
    with client_for(served(agent)) as client:
        frames = send(client, "order?")
        kept = reply_of(client, frames)
    assert [f["delta"] for f in frames if f["type"] == "token"] == ['{"order_id": "B2"}']
    assert frames[-1]["text"] == kept == '{"order_id": "B2"}'


def test_what_a_structured_agent_says_besides_its_output_is_neither_streamed_nor_kept() -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Reply]:
        if len(messages) == 1:
            yield "Let me look. "
            yield call("lookup", {"order": "A1"}, "c1")
        else:
            yield "Here you go. "
            yield call(info.output_tools[0].name, {"order_id": "A1"}, "o1")

    agent = PydanticAgent(FunctionModel(stream_function=stream), output_type=Order)

    @agent.tool_plain
    def lookup(order: str) -> str:
        return "found"

    with client_for(served(agent)) as client:
        frames = send(client, "order?")
        kept = reply_of(client, frames)
        history = server_context(client, frames[0]["contextId"], "support").history
    assert [f["delta"] for f in frames if f["type"] == "token"] == ['{"order_id": "A1"}']
    assert frames[-1]["text"] == kept == '{"order_id": "A1"}'
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", True)]
    # What the model said is still in the agent's messages, for the next run.
    [messages] = [m["messages"] for m in history if m["role"] == "pydantic-ai"]
    assert "Here you go. " in json.dumps(messages)


def test_a_draft_the_output_validator_rejects_streams_but_is_not_kept() -> None:
    script = Script(
        ["Let me look. ", *[call("lookup", {"order": "1"}, "c1")]],
        ["DRAFT ", "reply."],
        ["Final ", "answer."],
    )
    agent, _ = support_agent(script)

    @agent.agent.output_validator
    def no_drafts(output: str) -> str:
        if output.startswith("DRAFT"):
            raise ModelRetry("no drafts")
        return output + "!"  # a validator may change the output, too

    with client_for(agent) as client:
        frames = send(client, "order?")
        kept = reply_of(client, frames)
        history = server_context(client, frames[0]["contextId"], "support").history
    assert deltas(frames, "token") == "Let me look. DRAFT reply.Final answer."
    assert frames[-1]["text"] == kept == "Let me look. Final answer.!"
    assert [m["content"] for m in history if m["role"] == "assistant"] == [kept]
    assert len(script.requests) == 3


def test_usage_limits_and_model_settings_come_from_the_agent_class() -> None:
    seen: list[ModelSettings | None] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Reply]:
        seen.append(info.model_settings)
        yield call("lookup", {"order": str(len(seen))}, f"c{len(seen)}")

    limited = PydanticAgent(FunctionModel(stream_function=stream))

    @limited.tool_plain
    def lookup(order: str) -> str:
        return "on its way"

    class Limited(PydanticAIAgent):
        agent = limited

        def usage_limits(self, run: Run) -> UsageLimits | None:
            return UsageLimits(request_limit=run.data["requests"])

        def model_settings(self, run: Run) -> ModelSettings | None:
            return {"temperature": 0.25}

    with client_for(Limited) as client:
        body = {"message": {"text": "loop"}, "data": {"requests": 2}}
        frames = parse_sse(client.post("/agents/support/runs", json=body).text)
        history = server_context(client, frames[0]["contextId"], "support").history
    [error] = [f for f in frames if f["type"] == "error"]
    assert (error["code"], error["retryable"]) == ("agent_error", False)
    assert frames[-1]["stopReason"] == "error"
    assert len(seen) == 2 and all(s is not None and s["temperature"] == 0.25 for s in seen)
    # The calls it finished before the limit are kept for the next message.
    assert [m["output"] for m in history if m["role"] == "tool"] == ["on its way"] * 2


def test_a_rejected_draft_after_a_handoff_keeps_what_the_first_agent_said() -> None:
    # A handoff's two agents share one reply: dropping the draft keeps the first's part.
    script = Script(["DRAFT ", "reply."], ["Final ", "answer."])
    agent, _ = support_agent(script)

    @agent.agent.output_validator
    def no_drafts(output: str) -> str:
        if output.startswith("DRAFT"):
            raise ModelRetry("no drafts")
        return output

    class Triage(Agent):
        async def run(self, run: Run, text: str) -> None:
            await run.say("Passing you on. ")
            await run.handoff("support", text)

    app = app_for({"triage": Triage, "support": agent}, store=MemoryStore())
    with TestClient(app) as client:
        frames = parse_sse(
            client.post("/agents/triage/runs", json={"message": {"text": "order?"}}).text
        )
        transcript = client.get(f"/agents/triage/contexts/{frames[0]['contextId']}").json()
    assert deltas(frames, "token") == "Passing you on. DRAFT reply.Final answer."
    assert frames[-1]["text"] == "Passing you on. Final answer."
    assert transcript["turns"][-1]["text"] == "Passing you on. Final answer."
