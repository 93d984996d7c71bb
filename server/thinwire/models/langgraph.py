"""LangGraphAgent: a LangGraph compiled graph you already built, served by thinwire.

    graph = builder.compile()

    class Planner(LangGraphAgent):
        graph = graph

Each message runs the graph on `{"messages": [HumanMessage(text)]}` (override `input`;
a `StateGraph` whose input has no `messages` is refused otherwise) in the conversation's
own thread. Thinwire is the graph's checkpointer (`HistorySaver`, swapped in for the
run): each run keeps the thread's checkpoint in `run.history` as a
`{"role": "langgraph", "thread": {...}}` entry, so the graph's whole state survives
restarts and belongs to the conversation — and, kept with each exchange, a regenerated
reply or an edited message resumes the thread as it was on the branch it forks from.

What the user sees: chat model tokens (stream mode "messages"), of every node or of the
`streamed_nodes` — text blocks as `say`, reasoning blocks as `think` — and the tools the
graph runs (any LangChain tool, seen through its callbacks) as tool frames, by name; their
arguments and outputs go to the history only.

Durable replay: the graph's run is cut into recorded steps (`run.step`) where a tool
finishes and where the graph ends or stops at `interrupt()`; each finished tool goes
through `run.call_tool` between them. An `interrupt()` becomes `run.interrupt`; the step
before it recorded the thread's checkpoint. A resumed run replays the steps — the graph
does not run again the nodes it finished — loads that checkpoint, and goes on with
`Command(resume={interrupt_id: decision})`: LangGraph re-runs the interrupted node from its
start, as it always does — a `ToolNode` runs its other calls again, and a call shown
already (by its id) is not shown or recorded twice. A graph that stops at an interrupt
while tools it started still run (a `ToolNode`'s other calls, side by side) is taken as
stopped once they have ended, so they show in the run that asks.

Deliberate divergence: the adapter sees the graph's tools, it does not run them, and
`call_tool` shows a tool when it is called; so a tool shows when it has finished (its call
and result frames together), and one that stopped at `interrupt()` shows once it has run
with the answer.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import logging
from collections.abc import (
    AsyncIterator,
    Collection,
    Iterator,
    Mapping,
    MutableSequence,
    Sequence,
)
from functools import partial
from typing import Any, ClassVar
from uuid import UUID

from pydantic_core import to_jsonable_python

from thinwire.agent import Agent, Run, described
from thinwire.interrupts import ToolFailed
from thinwire.models.messages import UNFINISHED
from thinwire.models.questions import Question, question_of

try:
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import LLMResult
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.errors import GraphBubbleUp
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.pregel import Pregel
    from langgraph.types import Command
except ImportError as exc:  # pragma: no cover - exercised with the extra uninstalled
    raise ImportError('LangGraphAgent needs langgraph: pip install "thinwire[langgraph]"') from exc

__all__ = ["HISTORY_ROLE", "HistorySaver", "LangGraphAgent", "Question"]

logger = logging.getLogger("thinwire.models")

#: The role of the history entry that holds the graph's thread.
HISTORY_ROLE = "langgraph"
#: The name of a stretch of the graph's run in the run's journal.
STEP = "langgraph"


class LangGraphAgent(Agent):
    """A thinwire agent that runs `graph`, a compiled LangGraph graph, on every message."""

    #: The compiled graph (`builder.compile()`); its own checkpointer is replaced.
    graph: ClassVar[Pregel[Any, Any, Any, Any]]
    #: The nodes whose messages the user sees (a subgraph's, by the node that holds it);
    #: None: every node's.
    streamed_nodes: ClassVar[frozenset[str] | None] = None

    @classmethod
    def check_class(cls) -> None:
        super().check_class()
        name, graph = cls.__name__, getattr(cls, "graph", None)
        if graph is None:
            raise TypeError(f"{name} has no graph: set graph = builder.compile()")
        if not isinstance(graph, Pregel):
            raise TypeError(
                f"{name}.graph must be a compiled LangGraph graph (builder.compile()), "
                f"not {described(graph)}"
            )
        keys = input_keys(graph)
        if cls.input is LangGraphAgent.input and keys is not None and "messages" not in keys:
            raise TypeError(
                f"{name}.graph's input has no 'messages' key for the user's message: "
                f"override input() to give the graph its input (its keys: {', '.join(keys)})"
            )
        nodes = cls.streamed_nodes
        if nodes is None:
            return
        if (
            isinstance(nodes, str | bytes | Mapping)
            or not isinstance(nodes, Collection)
            or not all(isinstance(node, str) for node in nodes)
        ):
            raise TypeError(
                f"{name}.streamed_nodes must be a set of node names (str), such as "
                f'frozenset({{"agent"}}), or None for every node, not {described(nodes)}'
            )
        if unknown := sorted(set(nodes) - set(graph.nodes)):
            known = ", ".join(sorted(set(graph.nodes) - {"__start__"}))
            raise TypeError(
                f"{name}.streamed_nodes names no node of the graph: {', '.join(unknown)} "
                f"(its nodes: {known})"
            )

    def input(self, run: Run, text: str) -> Any:
        """The graph's input for a message."""
        return {"messages": [HumanMessage(text)]}

    def config(self, run: Run) -> RunnableConfig:
        """More config for the run (`recursion_limit`, `configurable` values…)."""
        return {}

    def context(self, run: Run) -> Any:
        """The graph's runtime context (`context=`), for a graph with a context schema."""
        return None

    def question(self, value: Any) -> Question:
        """What a person is asked for `interrupt(value)`: a string is the prompt; a dict
        gives `prompt` (or `question`) and `options`, and is sent whole as the payload."""
        return question_of(value)

    async def run(self, run: Run, text: str) -> None:
        saver = HistorySaver(run.context_id, saved_thread(run.history))
        session = Session(self.graph.copy({"checkpointer": saver}), saver, self.streamed_nodes)
        session.start(self.input(run, text), self.run_config(run), self.context(run))
        shown: set[str] = set()  # the ids of the tool calls shown
        try:
            while True:
                outcome = await run.step(STEP, partial(session.advance, run))
                if "tool" in outcome:
                    await show_tool(run, outcome["tool"], shown)
                elif "interrupts" in outcome:
                    saver.load(outcome["thread"])
                    answers = await self.answers(run, outcome["interrupts"])
                    session.start(Command(resume=answers))
                else:
                    break
        except BaseException:
            # Stopped, failed, or asking a person: the thread as it stands joins the
            # history (an answer replays the run from its start instead; a stop keeps it).
            await answer_unfinished(session.graph, self.run_config(run), run.history)
            keep(run.history, saver)  # what the graph finished, as its checkpointer had it
            raise
        finally:
            await session.close()
        keep(run.history, saver)

    def run_config(self, run: Run) -> RunnableConfig:
        config = self.config(run)
        configurable = {**config.get("configurable", {}), "thread_id": run.context_id}
        return {**config, "configurable": configurable}

    async def answers(self, run: Run, interrupts: list[dict[str, Any]]) -> dict[str, Any]:
        decisions = {}
        for pending in interrupts:
            question = self.question(pending["value"])
            decisions[pending["id"]] = await run.interrupt(
                question.prompt, options=question.options, payload=question.payload
            )
        return decisions


async def show_tool(run: Run, tool: dict[str, Any], shown: set[str]) -> None:
    """A tool the graph ran, through `run.call_tool`: its frames, its record. Once per
    call: a resumed graph re-runs the node an interrupt stopped from its start, and with it
    the calls of it that had finished (a `ToolNode`'s other calls), shown already."""
    if tool["id"] is not None:
        if tool["id"] in shown:
            return
        shown.add(tool["id"])

    async def ended(**_: Any) -> Any:
        if not tool["ok"]:
            raise RuntimeError(tool["error"])
        return tool["output"]

    with contextlib.suppress(ToolFailed):  # the graph dealt with its tool's failure itself
        await run.call_tool(tool["name"], ended, tool["arguments"], call_id=tool["id"])


async def answer_unfinished(
    graph: Pregel[Any, Any, Any, Any], config: RunnableConfig, history: Sequence[dict[str, Any]]
) -> None:
    """A run cut short during a tool (a stop, or a question a stop then ends) leaves the
    model's calls without their results in the thread's messages, which chat APIs refuse
    (so every later send would fail): each is answered with the result the run recorded
    for it — a tool of the node that stopped may have ended — or as unfinished. Only for a
    graph whose state has `messages`."""
    try:
        values = (await graph.aget_state(config)).values
        messages = values.get("messages") if isinstance(values, dict) else None
        if not messages or not isinstance(messages, list):
            return
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        calls = [c for c in (last.tool_calls if last else []) if c["id"] not in answered]
        if calls:
            recorded = {
                m["callId"]: m for m in history if m.get("role") == "tool" and "callId" in m
            }
            results = [answer(call, recorded.get(call["id"])) for call in calls]
            await graph.aupdate_state(config, {"messages": results})
    except Exception:  # a graph of another shape: its thread is kept as it was
        logger.warning("could not answer the unfinished tool calls", exc_info=True)


def answer(call: Mapping[str, Any], record: Mapping[str, Any] | None) -> ToolMessage:
    """A call's result, as its tool would have given it, from the run's record of it."""
    if record is None:
        return ToolMessage(UNFINISHED, tool_call_id=call["id"], name=call["name"])
    if not record["ok"]:
        error = f"error: {record['error']}"
        return ToolMessage(error, tool_call_id=call["id"], name=call["name"], status="error")
    output = record["output"]
    content = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
    return ToolMessage(content, tool_call_id=call["id"], name=call["name"])


def input_keys(graph: Pregel[Any, Any, Any, Any]) -> list[str] | None:
    """The keys of a `StateGraph`'s input, sorted; None for a graph of another kind (the
    functional API's `entrypoint` takes any input)."""
    if not isinstance(graph, CompiledStateGraph):
        return None
    return sorted(graph.builder.schemas[graph.builder.input_schema])


def saved_thread(history: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest checkpoint of the branch, read from the end."""
    for entry in reversed(history):
        if entry.get("role") == HISTORY_ROLE:
            thread: dict[str, Any] = entry["thread"]
            return thread
    return None


def keep(history: MutableSequence[dict[str, Any]], saver: HistorySaver) -> None:
    """The thread's checkpoint joins the history. Earlier ones stay with their exchanges:
    they are what a branch forked from there resumes."""
    history.append({"role": HISTORY_ROLE, "thread": saver.dump(root_only=True)})


def jsonable(value: Any) -> Any:
    if isinstance(value, BaseMessage):
        return jsonable(value.content)
    return to_jsonable_python(value, fallback=repr)


class Session:
    """The live execution of the graph for one run: its stream and what its callbacks
    tell (tools that ended, model calls' tokens) in one queue, read by the run's steps."""

    def __init__(
        self,
        graph: Pregel[Any, Any, Any, Any],
        saver: HistorySaver,
        streamed_nodes: frozenset[str] | None = None,
    ) -> None:
        self.graph = graph
        self.saver = saver
        self.streamed_nodes = streamed_nodes
        self.queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.pump: asyncio.Task[None] | None = None
        self.payload: Any = None
        self.pending = False
        self.config: RunnableConfig = {}
        self.runtime_context: Any = None
        #: The tools the graph started whose end has not been read (by callback run id).
        self.running: set[UUID] = set()
        #: The graph has stopped; tools it started may still run (see `advance`).
        self.ended = False

    def start(
        self, payload: Any, config: RunnableConfig | None = None, context: Any = None
    ) -> None:
        """What the next live step runs the graph on (an input, or a `Command`)."""
        self.payload, self.pending = payload, True
        if config is not None:
            observer = Observer(self.queue, asyncio.get_running_loop())
            self.config = {**config, "callbacks": [observer]}
            self.runtime_context = context

    async def advance(self, run: Run) -> dict[str, Any]:
        """Stream the graph until a tool ends or the graph stops; what happened, as JSON.

        A graph that stops at an `interrupt()` may leave tools it started running: a
        `ToolNode` runs its calls side by side, and one that asks ends the node while
        the others go on. The graph stops only once they have ended, so that what they
        did shows, and is recorded, in this run, whichever finished first."""
        if self.pending:
            await self.close()
            self.pending, self.ended, self.running = False, False, set()
            self.pump = asyncio.create_task(self.stream(self.payload))
        while True:
            if self.ended and not self.running:
                return await self.stopped()
            kind, item = await self.queue.get()
            if kind == "started":
                self.running.add(item)
            elif kind == "tool":
                run_id, tool = item
                self.running.discard(run_id)
                return {"tool": tool}
            elif kind == "asked":  # a tool stopped by interrupt(): it runs again on resume
                self.running.discard(item)
            elif kind == "message":
                await show_message(run, item)
            elif kind == "usage":
                run.record_usage(*item)
            elif kind == "error":
                raise item
            else:
                self.ended = True

    async def stream(self, payload: Any) -> None:
        try:
            chunks: AsyncIterator[Any] = self.graph.astream(
                payload,
                self.config,
                context=self.runtime_context,
                stream_mode="messages",
                subgraphs=True,
            )
            async for namespace, (message, metadata) in chunks:  # with subgraphs
                if self.streamed(namespace, metadata):
                    self.queue.put_nowait(("message", message))
        except Exception as exc:
            self.queue.put_nowait(("error", exc))
        else:
            self.queue.put_nowait(("done", None))

    def streamed(self, namespace: tuple[str, ...], metadata: Mapping[str, Any]) -> bool:
        """Whether the user sees a message of this node: a subgraph's nodes are seen
        through the graph's node that holds it (the first part of the namespace)."""
        if self.streamed_nodes is None:
            return True
        node = namespace[0].split(":")[0] if namespace else metadata.get("langgraph_node")
        return node in self.streamed_nodes

    async def stopped(self) -> dict[str, Any]:
        state = await self.graph.aget_state(self.config)
        if not state.interrupts:
            return {"end": True}
        interrupts = [{"id": i.id, "value": jsonable(i.value)} for i in state.interrupts]
        return {"interrupts": interrupts, "thread": self.saver.dump()}

    async def close(self) -> None:
        pump, self.pump = self.pump, None
        if pump is not None and not pump.done():
            pump.cancel()
            await asyncio.gather(pump, return_exceptions=True)


async def show_message(run: Run, message: BaseMessage) -> None:
    """A chat model's message (or a piece of one) as the user sees it."""
    if not isinstance(message, AIMessage):
        return  # tool results, the user's own words: not the reply
    for block in message.content_blocks:
        if block["type"] == "text":
            await run.say(block["text"])
        elif block["type"] == "reasoning":
            await run.think(block.get("reasoning", ""))
        elif block["type"] == "non_standard" and block["value"].get("type") == "thinking":
            await run.think(str(block["value"].get("thinking", "")))


class Observer(BaseCallbackHandler):
    """Puts what the graph's callbacks tell into the session's queue, from whatever
    thread runs them: each tool that started, and how it ended (one stopped by
    `interrupt()` has not finished; it runs again with the answer), each model call's
    tokens."""

    run_inline = True

    def __init__(
        self, queue: asyncio.Queue[tuple[str, Any]], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.queue = queue
        self.loop = loop
        self.started: dict[UUID, dict[str, Any]] = {}

    def put(self, kind: str, item: Any) -> None:
        try:
            here = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread (a sync tool)
            here = None
        if here is self.loop:  # now, so it keeps its place among the stream's messages
            self.queue.put_nowait((kind, item))
        else:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, (kind, item))

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        arguments = jsonable(inputs) if isinstance(inputs, dict) else {"input": input_str}
        self.started[run_id] = {
            "name": name,
            "arguments": arguments,
            "id": kwargs.get("tool_call_id"),
        }
        self.put("started", run_id)

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        tool = self.started.pop(run_id, None)
        if tool is None:
            return
        if isinstance(output, ToolMessage) and output.status == "error":
            self.put("tool", (run_id, {**tool, "ok": False, "error": str(output.content)}))
        else:
            self.put("tool", (run_id, {**tool, "ok": True, "output": jsonable(output)}))

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        tool = self.started.pop(run_id, None)
        if tool is None:
            return
        if isinstance(error, GraphBubbleUp):
            self.put("asked", run_id)
        else:
            self.put("tool", (run_id, {**tool, "ok": False, "error": str(error)}))

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        for generation in (g for batch in response.generations for g in batch):
            message = getattr(generation, "message", None)
            usage = getattr(message, "usage_metadata", None)
            if message is None or not usage:
                continue
            model = message.response_metadata.get("model_name") or "chat-model"
            self.put("usage", (model, usage["input_tokens"], usage["output_tokens"]))


class HistorySaver(BaseCheckpointSaver[int]):
    """A checkpointer for one conversation's thread that keeps, per namespace, the latest
    checkpoint and its pending writes as JSON (LangGraph's serializer, in base64) — all a
    thread needs to go on or to resume an interrupt. Not for time travel, and not for the
    beta `DeltaChannel`, which needs the checkpoints before the latest."""

    def __init__(self, thread_id: str, saved: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.thread_id = thread_id
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.load(saved or {})

    def load(self, saved: Mapping[str, Any]) -> None:
        # In place: a saver LangGraph clones (`with_allowlist`) shares the dict.
        self.namespaces.clear()
        self.namespaces.update(copy.deepcopy(dict(saved.get("namespaces", {}))))

    def dump(self, *, root_only: bool = False) -> dict[str, Any]:
        kept = {ns: e for ns, e in self.namespaces.items() if ns == "" or not root_only}
        return {"namespaces": copy.deepcopy(kept)}

    def encoded(self, value: Any) -> list[str]:
        kind, data = self.serde.dumps_typed(value)
        return [kind, base64.b64encode(data).decode("ascii")]

    def decoded(self, value: list[str]) -> Any:
        return self.serde.loads_typed((value[0], base64.b64decode(value[1])))

    def address(self, namespace: str, checkpoint_id: str | None) -> RunnableConfig:
        configurable = {"thread_id": self.thread_id, "checkpoint_ns": namespace}
        return {"configurable": {**configurable, "checkpoint_id": checkpoint_id}}

    def entry(self, namespace: str, entry: dict[str, Any]) -> CheckpointTuple:
        writes = sorted(entry["writes"], key=lambda w: writes_sort_key(w[4], w[0], w[1]))
        return CheckpointTuple(
            config=self.address(namespace, entry["id"]),
            checkpoint=self.decoded(entry["checkpoint"]),
            metadata=self.decoded(entry["metadata"]),
            parent_config=self.address(namespace, entry["parent"]) if entry["parent"] else None,
            pending_writes=[(w[0], w[2], self.decoded(w[3])) for w in writes],
        )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        namespace = config["configurable"].get("checkpoint_ns", "")
        entry = self.namespaces.get(namespace)
        wanted = get_checkpoint_id(config)
        if entry is None or (wanted is not None and wanted != entry["id"]):
            return None
        return self.entry(namespace, entry)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        wanted = config["configurable"].get("checkpoint_ns") if config else None
        found = [self.entry(ns, e) for ns, e in self.namespaces.items() if wanted in (None, ns)]
        matching = [
            t for t in found if all(t.metadata.get(k) == v for k, v in (filter or {}).items())
        ]
        yield from matching[:limit]

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        namespace = config["configurable"].get("checkpoint_ns", "")
        self.namespaces[namespace] = {
            "id": checkpoint["id"],
            "parent": config["configurable"].get("checkpoint_id"),
            "checkpoint": self.encoded(checkpoint),
            "metadata": self.encoded(get_checkpoint_metadata(config, metadata)),
            "writes": [],
        }
        return self.address(namespace, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        entry = self.namespaces.get(config["configurable"].get("checkpoint_ns", ""))
        if entry is None or entry["id"] != config["configurable"].get("checkpoint_id"):
            return
        stored: list[list[Any]] = entry["writes"]
        for index, (channel, value) in enumerate(writes):
            position = WRITES_IDX_MAP.get(channel, index)
            same = [i for i, w in enumerate(stored) if w[0] == task_id and w[1] == position]
            if same and position >= 0:
                continue  # a write once recorded stays, as in LangGraph's own savers
            record = [task_id, position, channel, self.encoded(value), task_path]
            if same:
                stored[same[0]] = record
            else:
                stored.append(record)

    def delete_thread(self, thread_id: str) -> None:
        self.namespaces.clear()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for found in self.list(config, filter=filter, before=before, limit=limit):
            yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)
