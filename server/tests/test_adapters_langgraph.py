"""LangGraphAgent: a compiled LangGraph graph served by thinwire, driven offline by
langchain-core's fake chat model: tokens, reasoning and tools by name, the graph's thread
kept in thinwire's store (also after a restart), `interrupt()` as a thinwire interrupt whose
decision resumes the graph without calling the model again, usage, and failures."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import Annotated, Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import BaseTool, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import interrupt
from pydantic import Field
from starlette.testclient import TestClient
from typing_extensions import TypedDict

from conftest import app_for, server_context, tool_frames
from conftest import decide as decide_on
from conftest import send as send_to
from thinwire import MemoryStore, Run
from thinwire.models.langgraph import HistorySaver, LangGraphAgent, Session

SECRET_PROMPT = "tw-lg-system-prompt-51d2"
SECRET_ARGUMENT = "tw-lg-argument-a06e"
SECRET_OUTPUT = "tw-lg-output-c3b7"
SECRET_PLAN = "tw-lg-private-plan-8f15"
TOKEN = "lg-operator-token"

send = partial(send_to, agent="planner")
decide = partial(decide_on, agent="planner")


class ScriptedChat(GenericFakeChatModel):
    """langchain-core's fake chat model, streaming what a real one streams: text word by
    word, reasoning, tool calls and the call's usage; it keeps what it was shown."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        self.seen.append(list(messages))
        refuse_unanswered_calls(messages)
        message = next(self.messages)
        assert isinstance(message, AIMessage)
        reasoning = message.additional_kwargs.get("reasoning_content")
        pieces = [AIMessageChunk(content="", additional_kwargs={"reasoning_content": reasoning})]
        pieces = pieces if reasoning else []
        words = str(message.content).split(" ") if message.content else []
        pieces += [AIMessageChunk(content=w if i == 0 else f" {w}") for i, w in enumerate(words)]
        calls = [
            {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
            for i, c in enumerate(message.tool_calls)
        ]
        usage = {"input_tokens": 11, "output_tokens": 3, "total_tokens": 14}
        last = {"model_name": "fake-chat"}
        pieces.append(
            AIMessageChunk(
                content="", tool_call_chunks=calls, usage_metadata=usage, response_metadata=last
            )  # type: ignore[arg-type]
        )
        for piece in pieces:
            piece.id = message.id
            chunk = ChatGenerationChunk(message=piece)
            if run_manager:
                await run_manager.on_llm_new_token(str(piece.content), chunk=chunk)
            yield chunk

    def answer(self) -> Callable[[MessagesState], Any]:
        async def agent(state: MessagesState) -> dict[str, Any]:
            shown = [SystemMessage(SECRET_PROMPT), *state["messages"]]
            return {"messages": [await self.ainvoke(shown)]}

        return agent


def refuse_unanswered_calls(messages: Sequence[BaseMessage]) -> None:
    """Refuse, as chat APIs do, a tool call not answered right after the model's message."""
    pending: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            pending.discard(message.tool_call_id)
            continue
        if pending:
            raise ValueError(f"tool calls without results: {sorted(pending)}")
        pending = {call["id"] for call in getattr(message, "tool_calls", [])}


def says(text: str, *calls: tuple[str, dict[str, Any]], reasoning: str = "") -> AIMessage:
    tool_calls = [{"name": n, "args": a, "id": f"call-{i}"} for i, (n, a) in enumerate(calls)]
    extra = {"reasoning_content": reasoning} if reasoning else {}
    return AIMessage(content=text, tool_calls=tool_calls, additional_kwargs=extra)


ran: list[str] = []


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    ran.append(f"lookup {order}")
    if order == "broken":
        raise ValueError("the order system is down")
    return f"order {order} is on its way ({SECRET_OUTPUT})"


@tool
def refund(order: str) -> str:
    """Refund an order, once a person agrees."""
    answer = interrupt({"prompt": f"Refund order {order}?", "options": ["yes", "no"]})
    ran.append(f"refund {order}: {answer}")
    return "refunded" if answer == "yes" else "not refunded"


def react(model: ScriptedChat, tools: Sequence[BaseTool], *, confirm: bool = False) -> Any:
    """A ReAct graph: the model, its tools, and back; with `confirm`, a last node that
    asks a person with `interrupt()` before the graph ends."""

    def confirmed(state: MessagesState) -> dict[str, Any]:
        answer = interrupt("Send this answer?")
        return {"messages": [AIMessage(content=f" (Sent: {answer}.)")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", model.answer())
    builder.add_node("tools", ToolNode(tools, handle_tool_errors=True))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges(
        "agent", tools_condition, {"tools": "tools", END: "confirm" if confirm else END}
    )
    builder.add_edge("tools", "agent")
    if confirm:
        builder.add_node("confirm", confirmed)
        builder.add_edge("confirm", END)
    return builder.compile()


def planner(graph: Any) -> type[LangGraphAgent]:
    class Planner(LangGraphAgent):
        pass

    Planner.graph = graph
    return Planner


def chat(*answers: AIMessage) -> ScriptedChat:
    ran.clear()
    return ScriptedChat(messages=iter(answers))


def client_for(agent: type[LangGraphAgent], store: MemoryStore | None = None) -> TestClient:
    app = app_for({"planner": agent}, store=store or MemoryStore(), operator_token=TOKEN)
    return TestClient(app)


def test_tokens_reasoning_and_tool_names_stream_and_the_rest_stays_on_the_server() -> None:
    model = chat(
        says("Let me look.", ("lookup", {"order": SECRET_ARGUMENT}), reasoning="An order. "),
        says("It is on its way."),
    )
    with client_for(planner(react(model, [lookup]))) as client:
        frames = send(client, "where is my order?")
        context_id = frames[0]["contextId"]
        transcript = client.get(f"/agents/planner/contexts/{context_id}").text
        history = server_context(client, context_id, "planner").history
        usage = client.get(
            f"/admin/agents/planner/contexts/{context_id}/usage",
            headers={"authorization": f"Bearer {TOKEN}"},
        ).json()
    kinds = [f["type"] for f in frames if f["type"] in ("thinking", "token", "tool_call")]
    assert kinds == ["thinking", "token", "token", "token", "tool_call", *["token"] * 5]
    assert "".join(f["delta"] for f in frames if f["type"] == "thinking") == "An order. "
    assert [f["delta"] for f in frames if f["type"] == "token"][:3] == ["Let", " me", " look."]
    assert frames[-1]["text"] == "Let me look.It is on its way."
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", True)]
    public = json.dumps(frames) + transcript
    for secret in (SECRET_PROMPT, SECRET_ARGUMENT, SECRET_OUTPUT):
        assert secret not in public
    [record] = [m for m in history if m["role"] == "tool"]
    assert record["arguments"] == {"order": SECRET_ARGUMENT} and record["callId"] == "call-0"
    assert SECRET_OUTPUT in record["output"]
    assert [m["role"] for m in history].count("langgraph") == 1
    assert usage["total"] == {"fake-chat": {"calls": 2, "inputTokens": 22, "outputTokens": 6}}


class Planned(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]
    plan: Any  # for the answering model only


PlanNode = Callable[[Planned], Any]


def plan_then_answer(plan: PlanNode) -> tuple[type[LangGraphAgent], ScriptedChat]:
    """A node that asks a model for a private plan, kept out of `messages`, then one whose
    model answers the user, reading the plan."""
    answerer = ScriptedChat(messages=iter([says("Sure, happy to help.")]))

    async def answer(state: Planned) -> dict[str, Any]:
        return {"messages": [await answerer.ainvoke([state["plan"], *state["messages"]])]}

    builder = StateGraph(Planned)
    builder.add_node("plan", plan)
    builder.add_node("answer", answer)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "answer")
    builder.add_edge("answer", END)
    return planner(builder.compile()), answerer


def assert_the_plan_stays_on_the_server(
    agent: type[LangGraphAgent], answerer: ScriptedChat
) -> None:
    with client_for(agent) as client:
        frames = send(client, "refund me")
        transcript = client.get(f"/agents/planner/contexts/{frames[0]['contextId']}").text
    assert frames[-1]["text"] == "Sure, happy to help."
    assert SECRET_PLAN not in json.dumps(frames) + transcript
    assert SECRET_PLAN in str(answerer.seen[0])  # the plan did its work


def test_a_nostream_tagged_models_text_never_reaches_the_wire() -> None:
    model = chat(says(f"Plan: {SECRET_PLAN}"))

    async def plan(state: Planned) -> dict[str, Any]:
        planned = await model.with_config(tags=["nostream"]).ainvoke(state["messages"])
        return {"plan": planned.text}  # its text: a message a node returns is shown

    assert_the_plan_stays_on_the_server(*plan_then_answer(plan))


@pytest.mark.parametrize("nested", [False, True], ids=["node", "subgraph"])
def test_only_the_streamed_nodes_messages_reach_the_wire(nested: bool) -> None:
    model = chat(says(f"Plan: {SECRET_PLAN}"))

    async def plan(state: Planned) -> dict[str, Any]:
        return {"plan": await model.ainvoke(state["messages"])}  # streamed, and the message

    if nested:  # the node "plan" is a graph whose node calls the model
        inner = StateGraph(Planned)
        inner.add_node("think", plan)
        inner.add_edge(START, "think")
        plan = inner.compile()  # type: ignore[assignment]
    agent, answerer = plan_then_answer(plan)
    agent.streamed_nodes = frozenset({"answer"})
    assert_the_plan_stays_on_the_server(agent, answerer)


def test_a_second_message_sees_the_first_also_after_a_restart() -> None:
    model = chat(says("Hello Ada."), says("You are Ada."), says("Still Ada."))
    agent = planner(react(model, [lookup]))
    store = MemoryStore()
    with client_for(agent, store) as client:
        context_id = send(client, "I am Ada")[0]["contextId"]
        send(client, "who am I?", context_id)
    with client_for(agent, store) as client:  # a fresh registry over the same store
        frames = send(client, "and now?", context_id)
        history = server_context(client, context_id, "planner").history
    assert frames[-1]["text"] == "Still Ada."
    shown = [(m.type, m.content) for m in model.seen[2]]
    assert shown == [
        ("system", SECRET_PROMPT),
        ("human", "I am Ada"),
        ("ai", "Hello Ada."),
        ("human", "who am I?"),
        ("ai", "You are Ada."),
        ("human", "and now?"),
    ]
    # A thread checkpoint per exchange: a branch forked there resumes from it.
    assert [m["role"] for m in history].count("langgraph") == 3


def test_an_interrupt_suspends_and_the_decision_resumes_the_graph_without_the_model() -> None:
    model = chat(says("Checking.", ("lookup", {"order": "7"})), says("Order 7 is on its way."))
    agent = planner(react(model, [lookup], confirm=True))
    store = MemoryStore()
    with client_for(agent, store) as client:
        asked = send(client, "where is 7?")
    request = asked[-2]["interrupt"]
    assert request["prompt"] == "Send this answer?" and asked[-1]["stopReason"] == "interrupted"
    assert asked[-1]["text"] == "Checking.Order 7 is on its way."
    assert len(model.seen) == 2 and ran == ["lookup 7"]
    with client_for(agent, store) as client:  # decided after a restart
        resumed = decide(client, asked, "yes")
        history = server_context(client, asked[0]["contextId"], "planner").history
    assert resumed[-1]["stopReason"] == "end" and resumed[-1]["text"] == " (Sent: yes.)"
    # The model and the tool were not called again: their work is in the checkpoint.
    assert len(model.seen) == 2 and ran == ["lookup 7"]
    assert [m["role"] for m in history].count("tool") == 1


def test_an_interrupt_inside_a_tool_shows_the_tool_once_it_ran_with_the_answer() -> None:
    model = chat(says("", ("refund", {"order": "9"})), says("Done."), says("Hi again."))
    agent = planner(react(model, [refund]))
    with client_for(agent) as client:
        asked = send(client, "refund 9")
        request = asked[-2]["interrupt"]
        assert request["prompt"] == "Refund order 9?" and request["options"] == ["yes", "no"]
        assert request["payload"] == {"prompt": "Refund order 9?", "options": ["yes", "no"]}
        assert tool_frames(asked) == []  # stopped inside the tool: it has not run yet
        resumed = decide(client, asked, "no")
        again = send(client, "hi", asked[0]["contextId"])
    assert tool_frames(resumed) == [("tool_call", "refund", None), ("tool_result", "refund", True)]
    assert resumed[-1]["text"] == "Done." and ran == ["refund 9: no"]
    assert len(model.seen) == 3 and again[-1]["text"] == "Hi again."
    assert ("tool", "not refunded") in [(m.type, m.content) for m in model.seen[2]]


def test_a_stop_while_a_tool_asks_keeps_the_thread_the_model_still_takes() -> None:
    model = chat(says("Let me see.", ("lookup", {"order": "7"}), ("refund", {"order": "7"})))
    agent = planner(react(model, [lookup, refund]))
    with client_for(agent) as client:
        asked = send(client, "refund 7")
        context_id = asked[0]["contextId"]
        assert asked[-1]["stopReason"] == "interrupted"
        client.post(f"/agents/planner/contexts/{context_id}/stop")
        model.messages = iter([says("Fine, no refund.")])
        frames = send(client, "forget it", context_id)
    assert frames[-1]["text"] == "Fine, no refund." and ran == ["lookup 7"]
    shown = [(m.type, m.content) for m in model.seen[-1]][2:]
    # The lookup it did is kept; the refund that asked is answered as unfinished.
    assert shown == [
        ("ai", "Let me see."),
        ("tool", "order 7 is on its way (" + SECRET_OUTPUT + ")"),
        ("tool", "error: the run ended before this call returned; it may have partly run"),
        ("human", "forget it"),
    ]


def test_a_call_the_resumed_node_runs_again_is_shown_and_recorded_once() -> None:
    # LangGraph resumes a ToolNode from its start: the lookup that had finished before the
    # refund asked runs again, and must not be shown or recorded twice.
    looked_up = asyncio.Event()

    @tool("lookup")
    async def lookup_first(order: str) -> str:
        """Look an order up."""
        ran.append(f"lookup {order}")
        looked_up.set()
        return f"order {order} is on its way"

    @tool("refund")
    async def refund_after(order: str) -> str:
        """Refund an order, once a person agrees."""
        await looked_up.wait()  # so the lookup has finished when the graph stops
        answer = interrupt(f"Refund order {order}?")
        ran.append(f"refund {order}: {answer}")
        return "refunded"

    model = chat(says("", ("lookup", {"order": "5"}), ("refund", {"order": "5"})), says("Done."))
    with client_for(planner(react(model, [lookup_first, refund_after]))) as client:
        asked = send(client, "refund 5")
        looked_up.clear()
        resumed = decide(client, asked, "yes")
        history = server_context(client, asked[0]["contextId"], "planner").history
    assert ran == ["lookup 5", "lookup 5", "refund 5: yes"]  # as models.md warns
    assert tool_frames(asked) == [("tool_call", "lookup", None), ("tool_result", "lookup", True)]
    assert tool_frames(resumed) == [("tool_call", "refund", None), ("tool_result", "refund", True)]
    records = [(m["name"], m["callId"]) for m in history if m["role"] == "tool"]
    assert records == [("lookup", "call-0"), ("refund", "call-1")]
    assert resumed[-1]["text"] == "Done." and resumed[-1]["toolCalls"] == ["refund"]


def test_a_tool_still_running_when_another_of_its_node_asks_shows_before_the_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A ToolNode runs its calls side by side: here the refund asks, the graph stops, and
    # only then does the lookup end. The run waits for it, so the lookup shows (and is
    # recorded) in the run that asks, as when it ends first, not only once resumed.
    graph_stopped = asyncio.Event()
    stream = Session.stream

    async def stream_then_signal(self: Session, payload: Any) -> None:
        await stream(self, payload)
        graph_stopped.set()

    monkeypatch.setattr(Session, "stream", stream_then_signal)

    @tool("lookup")
    async def lookup_last(order: str) -> str:
        """Look an order up."""
        await graph_stopped.wait()
        ran.append(f"lookup {order}")
        return f"order {order} is on its way"

    model = chat(says("", ("lookup", {"order": "5"}), ("refund", {"order": "5"})), says("Done."))
    with client_for(planner(react(model, [lookup_last, refund]))) as client:
        asked = send(client, "refund 5")
        assert asked[-1]["stopReason"] == "interrupted" and ran == ["lookup 5"]
        assert tool_frames(asked) == [
            ("tool_call", "lookup", None),
            ("tool_result", "lookup", True),
        ]
        resumed = decide(client, asked, "yes")
        history = server_context(client, asked[0]["contextId"], "planner").history
    assert tool_frames(resumed) == [("tool_call", "refund", None), ("tool_result", "refund", True)]
    records = [(m["name"], m["callId"]) for m in history if m["role"] == "tool"]
    assert records == [("lookup", "call-0"), ("refund", "call-1")]
    assert resumed[-1]["text"] == "Done."


def test_a_failing_tool_shows_as_failed_and_the_graph_goes_on() -> None:
    model = chat(says("", ("lookup", {"order": "broken"})), says("The system is down."))
    with client_for(planner(react(model, [lookup]))) as client:
        frames = send(client, "order?")
        history = server_context(client, frames[0]["contextId"], "planner").history
    assert tool_frames(frames) == [("tool_call", "lookup", None), ("tool_result", "lookup", False)]
    assert frames[-1]["text"] == "The system is down."
    [record] = [m for m in history if m["role"] == "tool"]
    assert record["ok"] is False and "the order system is down" in record["error"]


def test_a_failed_run_keeps_the_thread_it_finished() -> None:
    model = chat(says("One moment.", ("lookup", {"order": "1"})))  # then it has nothing to say
    agent = planner(react(model, [lookup]))
    with client_for(agent) as client:
        failed = send(client, "order 1?")
        model.messages = iter([says("Sorry about that.")])
        frames = send(client, "hello?", failed[0]["contextId"])
    assert failed[-1]["stopReason"] == "error" and frames[-1]["text"] == "Sorry about that."
    shown = [(m.type, m.content) for m in model.seen[-1]]
    assert ("human", "order 1?") in shown and (
        "tool",
        "order 1 is on its way (" + SECRET_OUTPUT + ")",
    ) in shown


def test_a_stop_during_a_tool_leaves_a_thread_the_model_still_takes() -> None:
    started = threading.Event()

    @tool
    async def slow(order: str) -> str:
        """Look an order up, slowly."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    model = chat(says("One moment.", ("slow", {"order": "1"})), says("Back."))
    with client_for(planner(react(model, [slow]))) as client:
        with client.websocket_connect("/agents/planner/ws") as socket:
            socket.send_json({"type": "send", "message": {"text": "order 1?"}})
            context_id = socket.receive_json()["contextId"]
            assert started.wait(10)
            socket.send_json({"type": "stop", "contextId": context_id})
            while (done := socket.receive_json())["type"] != "done":
                pass
        frames = send(client, "hello?", context_id)
    assert done["stopReason"] == "stopped" and frames[-1]["text"] == "Back."
    shown = [(m.type, m.content) for m in model.seen[-1]][2:]
    assert shown == [
        ("ai", "One moment."),
        ("tool", "error: the run ended before this call returned; it may have partly run"),
        ("human", "hello?"),
    ]


def test_a_stop_ends_the_run_at_once_while_a_sync_tool_runs_on_in_its_thread() -> None:
    """What models.md says: Python cannot stop a thread, so a plain-def tool runs to its
    end after the run has stopped; its result is dropped."""
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tool
    def blocking(order: str) -> str:
        """Look an order up, blocking its thread."""
        started.set()
        release.wait(10)
        finished.set()
        return "late"

    model = chat(says("One moment.", ("blocking", {"order": "1"})), says("Back."))
    with client_for(planner(react(model, [blocking]))) as client:
        with client.websocket_connect("/agents/planner/ws") as socket:
            socket.send_json({"type": "send", "message": {"text": "order 1?"}})
            context_id = socket.receive_json()["contextId"]
            assert started.wait(10)
            socket.send_json({"type": "stop", "contextId": context_id})
            while (done := socket.receive_json())["type"] != "done":
                pass
        assert done["stopReason"] == "stopped" and not finished.is_set()
        release.set()
        assert finished.wait(10)  # the tool ran on after the stop
        frames = send(client, "hello?", context_id)
    assert frames[-1]["text"] == "Back." and tool_frames(frames) == []
    assert ("tool", "late") not in [(m.type, m.content) for m in model.seen[-1]]


def test_the_saver_keeps_the_latest_checkpoint_of_each_namespace_as_json() -> None:
    saver = HistorySaver("ctx-1")
    config: Any = {"configurable": {"thread_id": "ctx-1", "checkpoint_ns": ""}}
    checkpoint: Any = {
        "id": "c1",
        "v": 1,
        "ts": "",
        "channel_values": {"x": 1},
        "channel_versions": {},
        "versions_seen": {},
    }
    stored = saver.put(config, checkpoint, {"step": 1}, {})
    saver.put_writes(stored, [("x", 2), ("__interrupt__", "ask")], "task-1", "path")
    saver.put_writes(stored, [("x", 3)], "task-1", "path")  # a write once recorded stays
    again = HistorySaver("ctx-1", json.loads(json.dumps(saver.dump())))
    found = again.get_tuple(config)
    assert found is not None and found.checkpoint["channel_values"] == {"x": 1}
    assert found.pending_writes == [("task-1", "__interrupt__", "ask"), ("task-1", "x", 2)]
    assert (
        again.get_tuple({"configurable": {**config["configurable"], "checkpoint_id": "old"}})
        is None
    )


class NoGraph(LangGraphAgent):
    pass


class Uncompiled(LangGraphAgent):
    graph = StateGraph(MessagesState)  # type: ignore[assignment]  # the builder, not compiled


class Question(TypedDict):
    question: str
    answer: str


def answered(state: Question) -> dict[str, Any]:
    return {"answer": f"You asked: {state['question']}"}


no_messages = StateGraph(Question)
no_messages.add_node("answer", answered)
no_messages.add_edge(START, "answer")


class NoMessages(LangGraphAgent):
    graph = no_messages.compile()


class StreamedNodesOne(LangGraphAgent):
    graph = react(chat(), [])
    streamed_nodes = "agent"  # type: ignore[assignment]  # one name, not a set of them


class StreamedNodesUnknown(LangGraphAgent):
    graph = react(chat(), [])
    streamed_nodes = frozenset({"agent", "answer"})


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        (NoGraph, r"^NoGraph has no graph: set graph = builder\.compile\(\)"),
        (Uncompiled, r"^Uncompiled\.graph must be a compiled LangGraph graph .*not a StateGraph$"),
        (
            NoMessages,
            r"^NoMessages\.graph's input has no 'messages' key .*: "
            r"override input\(\) to give the graph its input \(its keys: answer, question\)$",
        ),
        (
            StreamedNodesOne,
            r"^StreamedNodesOne\.streamed_nodes must be a set of node names \(str\), .* "
            r"not the str 'agent'$",
        ),
        (
            StreamedNodesUnknown,
            r"^StreamedNodesUnknown\.streamed_nodes names no node of the graph: answer "
            r"\(its nodes: agent, tools\)$",
        ),
    ],
)
def test_a_wrong_graph_is_refused_when_the_app_is_made(agent: type, says: str) -> None:
    with pytest.raises(TypeError, match=says):
        app_for({"planner": agent})


def test_a_graph_without_messages_runs_on_the_input_its_agent_gives() -> None:
    class Asked(LangGraphAgent):
        graph = no_messages.compile()

        def input(self, run: Run, text: str) -> Any:
            return {"question": text}

    with client_for(Asked) as client:
        frames = send(client, "why?")
        history = server_context(client, frames[0]["contextId"], "planner").history
    assert frames[-1]["stopReason"] == "end"  # its state has no message to say
    [thread] = [m for m in history if m["role"] == "langgraph"]
    assert thread["thread"]["namespaces"][""]  # and its state was kept


def test_a_tool_the_model_invents_is_told_to_the_model_and_never_shown() -> None:
    invented = "tw_invented_tool_4e7a"
    model = chat(says("", (invented, {"order": "1"})), says("Sorry."))
    with client_for(planner(react(model, [lookup]))) as client:
        frames = send(client, "order?")
        transcript = client.get(f"/agents/planner/contexts/{frames[0]['contextId']}").text
    assert tool_frames(frames) == [] and frames[-1]["toolCalls"] == []
    assert invented not in json.dumps(frames) and invented not in transcript
    [told] = [m for m in model.seen[1] if isinstance(m, ToolMessage)]  # the ToolNode's error
    assert f"{invented} is not a valid tool" in str(told.content)
