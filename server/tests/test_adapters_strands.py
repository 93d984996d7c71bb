"""StrandsAgent: a Strands Agents agent served by thinwire, driven offline by a scripted
strands `Model`: streaming, tools by name only, history in thinwire's store (also after a
restart), approvals and Strands' own interrupts as thinwire interrupts whose decision
resumes the run without asking the model again, stop, and failures."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import strands
from pydantic import BaseModel
from starlette.testclient import TestClient
from strands.hooks import BeforeToolCallEvent
from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolUse

from conftest import app_for, server_context, stop_over_websocket, tool_frames
from conftest import decide as decide_on
from conftest import send as send_to
from thinwire import Approval, MemoryStore, Run
from thinwire.models.strands import StrandsAgent

SECRET_PROMPT = "tw-strands-system-prompt-6d1e"
SECRET_ARGUMENT = "tw-strands-argument-90ab"
SECRET_OUTPUT = "tw-strands-output-47c2"
SECRET_ERROR = "tw-strands-model-error-e513"
TOKEN = "strands-operator-token"
PNG = b"\x89PNG\r\n\x1a\n-not-json"

send = partial(send_to, agent="support")
decide = partial(decide_on, agent="support")


@dataclass(frozen=True)
class Think:
    text: str


@dataclass(frozen=True)
class Call:
    name: str
    arguments: dict[str, Any]
    call_id: str


#: bytes: redacted reasoning; a float: a pause, in seconds
Piece = str | Think | bytes | Call | float | Exception


def events_of(pieces: list[Piece]) -> list[StreamEvent | float | Exception]:
    """A provider's stream for an answer: a content block per run of pieces of one kind."""
    events: list[StreamEvent | float | Exception] = [{"messageStart": {"role": "assistant"}}]
    block: type | None = None  # the kind of the content block open
    for piece in pieces:
        if isinstance(piece, float | Exception):
            events.append(piece)
            continue
        if block is not None and (block is Call or type(piece) is not block):
            events.append({"contentBlockStop": {}})
        if isinstance(piece, Call):
            start: Any = {"toolUse": {"name": piece.name, "toolUseId": piece.call_id}}
            events.append({"contentBlockStart": {"start": start}})
            delta: Any = {"toolUse": {"input": json.dumps(piece.arguments)}}
            events.append({"contentBlockDelta": {"delta": delta}})
        elif isinstance(piece, Think):
            events.append(
                {"contentBlockDelta": {"delta": {"reasoningContent": {"text": piece.text}}}}
            )
        elif isinstance(piece, bytes):
            redacted: Any = {"reasoningContent": {"redactedContent": piece}}
            events.append({"contentBlockDelta": {"delta": redacted}})
        else:
            events.append({"contentBlockDelta": {"delta": {"text": piece}}})
        block = type(piece)
    if block is not None:
        events.append({"contentBlockStop": {}})
    calls = any(isinstance(piece, Call) for piece in pieces)
    events.append({"messageStop": {"stopReason": "tool_use" if calls else "end_turn"}})
    usage: Any = {"inputTokens": 11, "outputTokens": 3, "totalTokens": 14}
    events.append({"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}})
    return events


class Scripted(Model):
    """A strands model that plays one scripted answer per call, remembers what each call
    showed it, and counts the streams it closed."""

    def __init__(self, *answers: list[Piece]) -> None:
        self.answers = list(answers)
        self.requests: list[Messages] = []
        self.closed = 0

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {"model_id": "scripted"}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self,
        messages: Messages,
        tool_specs: Any = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        self.requests.append(copy.deepcopy(messages))
        try:
            for event in events_of(self.answers[len(self.requests) - 1]):
                if isinstance(event, float):
                    await asyncio.sleep(event)
                elif isinstance(event, Exception):
                    raise event
                else:
                    yield event
        finally:
            self.closed += 1

    def seen(self, request: int) -> str:
        """What the model was shown in a call, as text."""
        return repr(self.requests[request])

    def said(self, request: int) -> list[tuple[str, str]]:
        """The role and text of each text block the model was shown in a call."""
        return [
            (message["role"], block["text"])
            for message in self.requests[request]
            for block in message["content"]
            if "text" in block
        ]

    def results(self, request: int) -> list[tuple[str, str]]:
        """The status and text of each tool result the model was shown in a call."""
        return [
            (block["toolResult"]["status"], json.dumps(block["toolResult"]["content"]))
            for message in self.requests[request]
            for block in message["content"]
            if "toolResult" in block
        ]


def support_agent(model: Scripted, **options: Any) -> tuple[type[StrandsAgent], list[str]]:
    """The docs' five lines, around a strands agent (built with `options`) with a tool (slow
    for some orders), one that needs approval, one that returns an image, and one that asks
    a person itself."""
    ran: list[str] = []

    @strands.tool
    async def lookup(order: str) -> dict[str, Any]:
        """Look an order up."""
        if order.startswith("slow"):
            await asyncio.sleep(0.05)
        elif order == "stuck":
            await asyncio.sleep(30)  # until the run is stopped
        ran.append(f"lookup {order}")
        if order == "broken":
            raise ValueError("the order system is down")
        return {"order": order, "note": SECRET_OUTPUT}

    @strands.tool
    def refund(order: str, amount: int) -> str:
        """Refund an order."""
        ran.append(f"refund {order} {amount}")
        return "refunded"

    @strands.tool
    def photo(order: str) -> dict[str, Any]:
        """A photo of an order's parcel."""
        ran.append(f"photo {order}")
        image = {"image": {"format": "png", "source": {"bytes": PNG}}}
        return {"status": "success", "content": [image]}

    @strands.tool(context=True)
    def cancel(order: str, tool_context: strands.ToolContext) -> str:
        """Cancel an order, asking a person itself."""
        answer = tool_context.interrupt("cancel", reason=f"Cancel {order}?")
        ran.append(f"cancel {order}: {answer}")
        return "cancelled"

    def support() -> strands.Agent:
        return strands.Agent(
            model=model,
            system_prompt=f"You help with orders. {SECRET_PROMPT}",
            tools=[lookup, refund, photo, cancel],
            callback_handler=None,
            **options,
        )

    class Support(StrandsAgent):
        agent = support
        requires_approval = frozenset({"refund"})

    return Support, ran


def client_for(agent: type[StrandsAgent], store: MemoryStore | None = None) -> TestClient:
    app = app_for({"support": agent}, store=store or MemoryStore(), operator_token=TOKEN)
    return TestClient(app)


def test_text_and_reasoning_stream_as_tokens_and_thinking_and_usage_is_kept() -> None:
    model = Scripted([Think("Checking "), Think("orders."), "Your order ", "is on ", "its way."])
    agent, _ = support_agent(model)
    with client_for(agent) as client:
        frames = send(client, "where is my order?")
        context_id = frames[0]["contextId"]
        usage = client.get(
            f"/admin/agents/support/contexts/{context_id}/usage",
            headers={"authorization": f"Bearer {TOKEN}"},
        ).json()
    assert [f["delta"] for f in frames if f["type"] == "thinking"] == ["Checking ", "orders."]
    assert [f["delta"] for f in frames if f["type"] == "token"] == [
        "Your order ",
        "is on ",
        "its way.",
    ]
    assert frames[-1]["text"] == "Your order is on its way." and frames[-1]["stopReason"] == "end"
    assert len(model.requests) == 1
    assert usage["total"] == {"scripted": {"calls": 1, "inputTokens": 11, "outputTokens": 3}}


def test_tools_cross_the_wire_by_name_only_and_their_record_stays_on_the_server() -> None:
    model = Scripted(
        ["Let me look. ", Call("lookup", {"order": SECRET_ARGUMENT}, "c1")],
        ["It is on its way."],
    )
    agent, ran = support_agent(model)
    with client_for(agent) as client:
        frames = send(client, "order?")
        context_id = frames[0]["contextId"]
        transcript = client.get(f"/agents/support/contexts/{context_id}").text
        history = server_context(client, context_id, "support").history
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", True)]
    assert frames[-1]["text"] == "Let me look. It is on its way."
    assert ran == [f"lookup {SECRET_ARGUMENT}"]
    public = json.dumps(frames) + transcript
    for secret in (SECRET_PROMPT, SECRET_ARGUMENT, SECRET_OUTPUT):
        assert secret not in public
    [record] = [m for m in history if m["role"] == "tool"]
    assert record["arguments"] == {"order": SECRET_ARGUMENT} and record["callId"] == "c1"
    [output] = record["output"]
    assert json.loads(output["text"]) == {"order": SECRET_ARGUMENT, "note": SECRET_OUTPUT}
    # The model got the tool's output back, and the agent's messages are in the history.
    assert model.results(1) == [("success", json.dumps(record["output"]))]
    [kept] = [m for m in history if m["role"] == "strands"]
    assert [m["role"] for m in kept["messages"]] == ["user", "assistant", "user", "assistant"]


def test_parallel_calls_run_in_the_models_order_so_a_replay_meets_them_in_that_order() -> None:
    calls: list[Piece] = [
        Call("lookup", {"order": "slow-1"}, "c1"),
        Call("lookup", {"order": "2"}, "c2"),
        Call("refund", {"order": "2", "amount": 5}, "c3"),
    ]
    model = Scripted(calls, ["Done."])
    agent, ran = support_agent(model)
    with client_for(agent) as client:
        asked = send(client, "refund 2")
        assert ran == ["lookup slow-1", "lookup 2"]  # in order, though the first is slower
        resumed = decide(client, asked, "approve")
    assert [f["name"] for f in asked if f["type"] == "tool_call"] == ["lookup", "lookup"]
    assert resumed[-1]["text"] == "Done." and len(model.requests) == 2
    assert ran == ["lookup slow-1", "lookup 2", "refund 2 5"]
    assert [status for status, _ in model.results(1)] == ["success"] * 3


def test_a_failing_tool_reaches_the_model_as_strands_error_live_and_on_replay() -> None:
    model = Scripted(
        [Call("lookup", {"order": "broken"}, "c1")],
        [Call("refund", {"order": "1", "amount": 5}, "c2")],
        ["The system is down; refunded."],
    )
    agent, ran = support_agent(model)
    with client_for(agent) as client:
        asked = send(client, "order 1?")
        resumed = decide(client, asked, "approve")
        history = server_context(client, asked[0]["contextId"], "support").history
    assert tool_frames(asked) == [("tool_call", "lookup", None), ("tool_result", "lookup", False)]
    error = "Error: the order system is down"  # as Strands words a ValueError
    assert model.results(1) == [("error", json.dumps([{"text": error}]))]
    # The replayed run showed the model the same error: the last call has it too.
    assert model.results(2)[0] == model.results(1)[0]
    assert resumed[-1]["text"] == "The system is down; refunded." and len(model.requests) == 3
    assert ran == ["lookup broken", "refund 1 5"]
    errors = [m.get("error") for m in history if m["role"] == "tool"]
    assert errors == [error, None]


def test_an_approval_suspends_and_the_decision_resumes_without_asking_the_model_again() -> None:
    model = Scripted(
        ["Checking. ", Call("lookup", {"order": "1234"}, "c1")],
        [Call("refund", {"order": "1234", "amount": 40}, "c2")],
        ["Refunded."],
    )
    agent, ran = support_agent(model)
    store = MemoryStore()
    with client_for(agent, store) as client:
        asked = send(client, "refund 1234")
    assert asked[-1]["stopReason"] == "interrupted"
    assert asked[-2]["interrupt"]["prompt"] == "Allow refund?"
    assert asked[-2]["interrupt"]["options"] == ["approve", "reject"]
    assert asked[-2]["interrupt"]["payload"] is None  # the arguments stay private
    assert ran == ["lookup 1234"] and len(model.requests) == 2
    with client_for(agent, store) as client:  # decided after a restart
        resumed = decide(client, asked, "approve")
    assert resumed[-1]["text"] == "Refunded." and resumed[-1]["stopReason"] == "end"
    assert tool_frames(resumed) == [("tool_call", "refund", None), ("tool_result", "refund", True)]
    # Both model calls and the lookup were replayed from the journal, not done again.
    assert len(model.requests) == 3 and ran == ["lookup 1234", "refund 1234 40"]
    assert [status for status, _ in model.results(2)] == ["success", "success"]


def test_a_stop_while_an_approval_waits_keeps_what_the_run_finished() -> None:
    model = Scripted(
        ["Checking. ", Call("lookup", {"order": "1234"}, "c1")],
        [Call("refund", {"order": "1234", "amount": 40}, "c2")],
        ["No refund, then."],
    )
    agent, ran = support_agent(model)
    with client_for(agent) as client:
        asked = send(client, "refund 1234")
        context_id = asked[0]["contextId"]
        client.post(f"/agents/support/contexts/{context_id}/stop")
        frames = send(client, "never mind", context_id)
    assert frames[-1]["text"] == "No refund, then." and ran == ["lookup 1234"]
    # The lookup it finished is the model's to read; the refund that waited is not.
    assert [status for status, _ in model.results(2)] == ["success"]
    assert "toolUse" in model.seen(2) and "'refund'" not in model.seen(2)


def test_a_rejection_reaches_the_model_as_the_tools_error() -> None:
    model = Scripted([Call("refund", {"order": "9", "amount": 5}, "c1")], ["Okay, no refund."])
    agent, ran = support_agent(model)
    with client_for(agent) as client:
        asked = send(client, "refund 9")
        resumed = decide(client, asked, "reject")
        history = server_context(client, asked[0]["contextId"], "support").history
    assert resumed[-1]["text"] == "Okay, no refund." and ran == [] and len(model.requests) == 2
    assert tool_frames(resumed) == []  # it did not run
    assert model.results(1) == [
        ("error", json.dumps([{"text": "a person rejected this call; it did not run"}]))
    ]
    [record] = [m for m in history if m["role"] == "tool"]
    assert record["name"] == "refund" and record["ok"] is False and record["callId"] == "c1"


def test_approval_decides_from_the_arguments_what_a_person_is_asked() -> None:
    model = Scripted(
        [Call("refund", {"order": "1", "amount": 5}, "c1")],
        [Call("refund", {"order": "2", "amount": 500}, "c2")],
        ["Both refunded."],
    )
    support, ran = support_agent(model)

    class Careful(support):
        def approval(self, tool_use: ToolUse) -> Approval | None:
            amount = tool_use["input"]["amount"]
            return Approval(f"Refund {amount}?", {"amount": amount}) if amount > 100 else None

    with client_for(Careful) as client:
        asked = send(client, "refund both")
        assert asked[-2]["interrupt"]["prompt"] == "Refund 500?"
        assert asked[-2]["interrupt"]["payload"] == {"amount": 500}
        assert ran == ["refund 1 5"]
        resumed = decide(client, asked, "approve")
    assert resumed[-1]["text"] == "Both refunded." and ran == ["refund 1 5", "refund 2 500"]


@pytest.mark.parametrize("answer", ["yes", "no"])
def test_a_hooks_interrupt_asks_a_person_and_the_answer_resumes_the_agent(answer: str) -> None:
    def confirm(event: BeforeToolCallEvent) -> None:
        question = {"prompt": "Look it up?", "options": ["yes", "no"]}
        if event.interrupt("confirm", reason=question) != "yes":
            event.cancel_tool = "the person said no"

    model = Scripted([Call("lookup", {"order": "7"}, "c1")], ["Answered."], ["Hi again."])
    Confirming, ran = support_agent(model, hooks=[confirm])
    store = MemoryStore()
    with client_for(Confirming, store) as client:
        asked = send(client, "order 7?")
    request = asked[-2]["interrupt"]
    assert request["prompt"] == "Look it up?" and request["options"] == ["yes", "no"]
    assert request["payload"] == {"prompt": "Look it up?", "options": ["yes", "no"]}
    assert len(model.requests) == 1 and ran == []
    with client_for(Confirming, store) as client:  # answered after a restart
        resumed = decide(client, asked, answer)
        again = send(client, "hi", asked[0]["contextId"])
    # The model's first answer was replayed, not asked for again.
    assert resumed[-1]["text"] == "Answered." and len(model.requests) == 3
    if answer == "yes":
        assert ran == ["lookup 7"] and [status for status, _ in model.results(1)] == ["success"]
        assert tool_frames(resumed) == [
            ("tool_call", "lookup", None),
            ("tool_result", "lookup", True),
        ]
    else:
        assert ran == [] and tool_frames(resumed) == []
        assert model.results(1) == [("error", json.dumps([{"text": "the person said no"}]))]
    assert again[-1]["text"] == "Hi again." and model.results(2) == model.results(1)


def test_a_structured_output_is_said_and_replays_with_the_calls_beside_it() -> None:
    class Answer(BaseModel):
        order: str
        status: str

    answer = Call("Answer", {"order": "2", "status": "refunded"}, "c1")
    model = Scripted([answer, Call("refund", {"order": "2", "amount": 5}, "c2")])
    agent, ran = support_agent(model, structured_output_model=Answer)
    with client_for(agent) as client:
        asked = send(client, "refund 2")
        resumed = decide(client, asked, "approve")
    assert json.loads(resumed[-1]["text"]) == {"order": "2", "status": "refunded"}
    assert len(model.requests) == 1 and ran == ["refund 2 5"]
    # Strands' check of the output is no tool of the agent's: not shown.
    assert tool_frames(asked) == [] and tool_frames(resumed) == [
        ("tool_call", "refund", None),
        ("tool_result", "refund", True),
    ]


def test_an_interrupt_inside_a_tool_fails_the_run_clearly(caplog: pytest.LogCaptureFixture) -> None:
    model = Scripted([Call("cancel", {"order": "7"}, "c1")], ["Never."])
    agent, ran = support_agent(model)
    with client_for(agent) as client:
        frames = send(client, "cancel 7")
    assert frames[-1]["stopReason"] == "error" and len(model.requests) == 1 and ran == []
    assert next(f for f in frames if f["type"] == "error")["code"] == "agent_error"
    assert "tool_context.interrupt" in caplog.text and "requires_approval" in caplog.text


def test_bytes_reach_the_model_and_are_kept_base64_encoded() -> None:
    model = Scripted(
        [b"redacted reasoning", Call("photo", {"order": "3"}, "c1")],
        ["Here it is."],
        [Call("lookup", {"order": "3"}, "c2")],
        ["Still there."],
    )
    agent, _ = support_agent(model)
    store = MemoryStore()
    with client_for(agent, store) as client:
        context_id = send(client, "show me 3")[0]["contextId"]
    with client_for(agent, store) as client:
        frames = send(client, "and the order?", context_id)
        history = server_context(client, context_id, "support").history
    assert base64.b64encode(PNG).decode() in json.dumps(list(history))
    assert frames[-1]["text"] == "Still there."
    for request in (1, 2, 3):  # live, then restored from the history after a restart
        blocks = [block for message in model.requests[request] for block in message["content"]]
        [image] = [
            block["toolResult"]["content"][0]["image"]
            for block in blocks
            if "toolResult" in block and "image" in block["toolResult"]["content"][0]
        ]
        assert image["source"]["bytes"] == PNG
        [reasoning] = [block["reasoningContent"] for block in blocks if "reasoningContent" in block]
        assert reasoning == {"redactedContent": b"redacted reasoning"}


def test_a_second_message_sees_the_first_also_after_a_restart() -> None:
    model = Scripted(["Hello Ada."], ["You are Ada."], ["Still Ada."])
    agent, _ = support_agent(model)
    store = MemoryStore()
    with client_for(agent, store) as client:
        context_id = send(client, "I am Ada")[0]["contextId"]
        send(client, "who am I?", context_id)
    with client_for(agent, store) as client:  # a fresh registry over the same store
        frames = send(client, "and now?", context_id)
        history = server_context(client, context_id, "support").history
    assert frames[-1]["text"] == "Still Ada."
    assert model.said(2) == [
        ("user", "I am Ada"),
        ("assistant", "Hello Ada."),
        ("user", "who am I?"),
        ("assistant", "You are Ada."),
        ("user", "and now?"),
    ]
    assert [m["role"] for m in history].count("strands") == 3


def test_messages_the_agent_is_built_with_come_first_and_stay_its_own() -> None:
    examples: Messages = [
        {"role": "user", "content": [{"text": "An example question"}]},
        {"role": "assistant", "content": [{"text": "An example answer"}]},
    ]
    model = Scripted(["Hello Ada."], ["Hello Bob."])
    agent, _ = support_agent(model, messages=examples)  # one list for every agent built
    with client_for(agent) as client:
        send(client, "I am Ada")
        send(client, "I am Bob")  # another conversation
    assert len(examples) == 2
    assert model.said(1) == [
        ("user", "An example question"),
        ("assistant", "An example answer"),
        ("user", "I am Bob"),
    ]


@pytest.mark.parametrize("waiting", ["model", "run"])
def test_a_stopped_run_closes_the_models_stream_and_keeps_what_it_said(
    waiting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped while the model's stream waits, or while the run does between two events."""
    pause: list[Piece] = [30.0] if waiting == "model" else []
    model = Scripted(["The first part. ", *pause, "Never said."], ["Going on."])
    agent, _ = support_agent(model)
    say = Run.say

    async def slow_say(run: Run, delta: str) -> None:
        await say(run, delta)
        if delta == "The first part. " and waiting == "run":
            await asyncio.sleep(30)

    monkeypatch.setattr(Run, "say", slow_say)
    with client_for(agent) as client:
        start, frame = stop_over_websocket(client, "tell me", at="token", agent="support")
        assert model.closed == 1  # the model's stream was closed, not left waiting
        frames = send(client, "go on", start["contextId"])
    assert frame["stopReason"] == "stopped" and frames[-1]["text"] == "Going on."
    assert model.said(1) == [
        ("user", "tell me"),
        ("assistant", "The first part. "),
        ("user", "go on"),
    ]


def test_a_run_stopped_in_a_tool_leaves_no_call_without_its_result() -> None:
    model = Scripted(["One moment. ", Call("lookup", {"order": "stuck"}, "c1")], ["Going on."])
    agent, _ = support_agent(model)
    with client_for(agent) as client:
        start, frame = stop_over_websocket(client, "order 1?", at="tool_call", agent="support")
        frames = send(client, "go on", start["contextId"])
    assert frame["stopReason"] == "stopped" and frames[-1]["text"] == "Going on."
    assert "toolUse" not in model.seen(1) and "toolResult" not in model.seen(1)
    assert model.said(1) == [
        ("user", "order 1?"),
        ("assistant", "One moment. "),
        ("user", "go on"),
    ]


def test_a_stop_ends_the_run_at_once_while_a_sync_tool_runs_on_in_its_thread() -> None:
    """What models.md says: Python cannot stop a thread, so a plain-def tool runs to its
    end after the run has stopped; its result is dropped."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    @strands.tool
    def blocking(order: str) -> str:
        """Look an order up, blocking its thread."""
        started.set()
        release.wait(10)
        finished.set()
        return "late"

    model = Scripted(["One moment. ", Call("blocking", {"order": "1"}, "c1")], ["Going on."])

    def support() -> strands.Agent:
        return strands.Agent(model=model, tools=[blocking], callback_handler=None)

    class Support(StrandsAgent):
        agent = support

    with client_for(Support) as client:
        start, frame = stop_over_websocket(
            client, "order 1?", at="tool_call", agent="support", once=started
        )
        assert frame["stopReason"] == "stopped" and not finished.is_set()
        release.set()
        assert finished.wait(10)  # the tool ran on after the stop
        frames = send(client, "go on", start["contextId"])
    assert frames[-1]["text"] == "Going on." and "late" not in model.seen(1)


def test_a_model_failure_is_an_agent_error_without_its_text_and_the_question_is_kept() -> None:
    model = Scripted(["Half ", RuntimeError(SECRET_ERROR)], ["Hello again."])
    agent, _ = support_agent(model)
    with client_for(agent) as client:
        failed = send(client, "refund everything")
        frames = send(client, "hello?", failed[0]["contextId"])
    assert failed[-1]["stopReason"] == "error" and SECRET_ERROR not in json.dumps(failed)
    assert next(f for f in failed if f["type"] == "error")["code"] == "agent_error"
    assert frames[-1]["text"] == "Hello again."
    # What the model had said is kept; the roles alternate as providers want them.
    assert model.said(1) == [
        ("user", "refund everything"),
        ("assistant", "Half "),
        ("user", "hello?"),
    ]


def test_a_question_left_unanswered_joins_the_next_in_one_user_turn() -> None:
    model = Scripted([RuntimeError(SECRET_ERROR)], ["Hello again."])
    agent, _ = support_agent(model)
    with client_for(agent) as client:
        failed = send(client, "refund everything")
        send(client, "hello?", failed[0]["contextId"])
    assert [m["role"] for m in model.requests[1]] == ["user"]
    assert model.said(1) == [("user", "refund everything"), ("user", "hello?")]


def test_the_docs_example_asks_a_person_for_big_refunds_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    [example] = [block for block in blocks if "StrandsAgent" in block]
    model = Scripted(
        [Call("refund", {"order": "1", "amount": 20}, "c1")],
        [Call("refund", {"order": "2", "amount": 500}, "c2")],
        ["Both refunded."],
    )
    monkeypatch.setattr(strands.models, "BedrockModel", lambda **_: model)
    namespace: dict[str, Any] = {"__name__": "docs_models"}
    exec(compile(example, "docs/models.md", "exec"), namespace)
    with TestClient(app_for({"support": namespace["Orders"]})) as client:
        asked = send(client, "refund both")
        resumed = decide(client, asked, "approve")
    assert asked[-2]["interrupt"]["prompt"] == "Refund 500 on order 2?"
    assert asked[-2]["interrupt"]["payload"] == {"order": "2"}
    assert [f["name"] for f in asked if f["type"] == "tool_result"] == ["refund"]
    assert resumed[-1]["text"] == "Both refunded." and len(model.requests) == 3


def test_an_agent_in_place_of_its_factory_is_refused_with_a_sentence() -> None:
    with pytest.raises(TypeError, match="a function that builds a strands Agent"):

        class Wrong(StrandsAgent):
            agent = strands.Agent(model=Scripted(), callback_handler=None)


def test_a_model_that_keeps_the_conversation_on_its_server_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Stateful(Scripted):
        @property
        def stateful(self) -> bool:
            return True

    model = Stateful(["Never."])
    agent, _ = support_agent(model)
    with client_for(agent) as client:
        frames = send(client, "hello")
    assert frames[-1]["stopReason"] == "error" and model.requests == []
    assert "keeps the conversation on its server" in caplog.text


class NoFactory(StrandsAgent):
    pass


class FactoryNotCallable(StrandsAgent):
    agent = "librarian"  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        (NoFactory, r"^NoFactory has no agent: set agent to a function that builds"),
        (FactoryNotCallable, r"^FactoryNotCallable\.agent must be a function that builds .*"),
    ],
)
def test_a_missing_agent_factory_is_refused_when_the_app_is_made(agent: type, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        app_for({"support": agent})


def test_a_tool_the_model_invents_is_told_to_the_model_and_never_shown() -> None:
    invented = "tw_invented_tool_4e7a"
    model = Scripted([Call(invented, {"order": "1"}, "c1")], ["Sorry."])
    agent, _ = support_agent(model)
    with client_for(agent) as client:
        frames = send(client, "order?")
        transcript = client.get(f"/agents/support/contexts/{frames[0]['contextId']}").text
    assert tool_frames(frames) == [] and frames[-1]["toolCalls"] == []
    assert invented not in json.dumps(frames) and invented not in transcript
    [(status, told)] = model.results(1)  # Strands' own error
    assert status == "error" and invented in told


def test_a_tool_a_hook_runs_for_an_invented_name_is_shown_by_its_own_name() -> None:
    # A hook may pick a tool for a call whose name matches none (a fallback): the tool
    # that runs is the developer's, the name the model's.
    invented = "tw_invented_tool_4e7a"
    model = Scripted([Call(invented, {"order": "1"}, "c1")], ["Found it."])
    agent, ran = support_agent(model)
    built = agent.agent

    def with_fallback() -> strands.Agent:
        made = built()
        lookup = made.tool_registry.registry["lookup"]

        def fallback(event: BeforeToolCallEvent) -> None:
            if event.selected_tool is None:
                event.selected_tool = lookup

        made.add_hook(fallback, BeforeToolCallEvent)
        return made

    agent.agent = with_fallback  # type: ignore[assignment]
    with client_for(agent) as client:
        frames = send(client, "order?")
        transcript = client.get(f"/agents/support/contexts/{frames[0]['contextId']}").text
    assert ran == ["lookup 1"]
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", True)]
    assert invented not in json.dumps(frames) and invented not in transcript


def test_input_that_is_no_json_object_never_runs_the_tool_and_the_model_is_told() -> None:
    model = Scripted([Call("lookup", ["1"], "c1")], ["Sorry."])  # type: ignore[arg-type]
    agent, ran = support_agent(model)
    with client_for(agent) as client:
        frames = send(client, "order?")
        history = server_context(client, frames[0]["contextId"], "support").history
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", False)]
    assert frames[-1]["text"] == "Sorry." and ran == []
    [record] = [m for m in history if m["role"] == "tool"]
    assert record["arguments"] == {"input": ["1"]} and "not a JSON object" in record["error"]
    [(status, said)] = model.results(1)
    assert status == "error" and "not a JSON object" in said
