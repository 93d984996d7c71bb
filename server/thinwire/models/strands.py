"""StrandsAgent: a Strands Agents `Agent` you already built, served by thinwire.

    def librarian() -> strands.Agent:
        return strands.Agent(model=model, system_prompt="You find books.", tools=[search])

    class Librarian(StrandsAgent):
        agent = librarian

`agent` builds the strands Agent, one per run: a strands Agent holds one conversation and
runs one invocation at a time. The run adds two middleware of ours and runs its tools
one at a time (`SequentialToolExecutor`), in the order the model gave them, so a replay
meets them in that order; the rest is the agent as it would run on its own:

- every model call is a recorded step (`run.step`): streamed as it comes (text to `say`,
  reasoning to `think`), its tokens counted (`record_usage`, from the `metadata` event),
  its stream events kept in the journal, so a resumed run replays them to the agent
  instead of calling the model again;
- every tool call goes through `run.call_tool`: the user sees the tool's name, the
  history keeps its arguments and its result's content, a resumed run replays it. A
  tool's error reaches the model as Strands words it (`"status": "error"`, its text);
- a tool named in `requires_approval`, or one `approval()` asks about, asks a person
  first with `run.interrupt`; a rejection reaches the model as the tool's error;
- an interrupt raised in a hook or a middleware (`event.interrupt(name, reason=...)`)
  asks a person with `run.interrupt`; the agent is resumed with the answer, as Strands
  resumes it. One raised inside a tool (`tool_context.interrupt`) fails the run: the tool
  has started, and the journal records a tool call only once it has finished;
- the agent's messages are kept in `run.history`, one `{"role": "strands", "messages":
  [...]}` entry per run, and given back to the agent of the next run. Bytes in them
  (images, documents, redacted reasoning) are kept base64-encoded, the way Strands' own
  session managers keep them (`encode_bytes_values`);
- a structured output (`structured_output_model`) is said as JSON at the end.

Deliberate divergences: consecutive messages of one role reach the model as one message
(a failed run leaves its question unanswered, and some providers, Bedrock among them, take
only alternating roles); a tool's error reaches the model as its text only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, MutableSequence, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar, Literal, cast

from thinwire.agent import REJECTED, Agent, Run, described
from thinwire.interrupts import Approval, Rejected, ToolFailed
from thinwire.models.questions import Question, question_of

try:
    import strands
    from strands.hooks import MessageAddedEvent
    from strands.interrupt import Interrupt
    from strands.middleware import (
        ExecuteToolContext,
        ExecuteToolStage,
        InvokeModelContext,
        InvokeModelStage,
        MiddlewareNext,
    )
    from strands.models.model import Model
    from strands.tools.executors import SequentialToolExecutor
    from strands.tools.structured_output.structured_output_tool import StructuredOutputTool
    from strands.types.content import Message, Messages
    from strands.types.events import ToolResultEvent, TypedEvent
    from strands.types.interrupt import InterruptResponseContent
    from strands.types.session import decode_bytes_values, encode_bytes_values
    from strands.types.streaming import StreamEvent
    from strands.types.tools import ToolResult, ToolSpec, ToolUse
except ImportError as exc:  # pragma: no cover - exercised with the extra uninstalled
    raise ImportError('StrandsAgent needs strands-agents: pip install "thinwire[strands]"') from exc

__all__ = ["HISTORY_ROLE", "Question", "StrandsAgent", "restored_messages"]

#: The role of the history entries that hold the agent's own messages.
HISTORY_ROLE = "strands"
#: The name of a model call in the run's journal.
STEP = "strands:model"


class StrandsAgent(Agent):
    """A thinwire agent that runs a strands Agent, built by `agent`, on every message."""

    #: Builds the run's strands Agent: a function of no arguments.
    agent: ClassVar[Callable[[], strands.Agent]]
    #: The names of the tools a person approves before each of their calls runs.
    requires_approval: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(cls.__dict__.get("agent"), strands.Agent):
            raise TypeError(
                f"{cls.__name__}.agent is a function that builds a strands Agent, not an Agent: "
                "an Agent holds one conversation, so each run gets its own"
            )

    @classmethod
    def check_class(cls) -> None:
        super().check_class()
        # Not called here, but once per run: a strands Agent may open clients as it is built.
        name, factory = cls.__name__, getattr(cls, "agent", None)
        if factory is None:
            raise TypeError(f"{name} has no agent: set agent to a function that builds one")
        if not callable(factory):
            raise TypeError(
                f"{name}.agent must be a function that builds a strands Agent, "
                f"not {described(factory)}"
            )

    def approval(self, tool_use: ToolUse) -> Approval | None:
        """What a person is asked before `tool_use` runs, or None to run it unasked.
        Public: shown as it is. The arguments are not shown unless you put them here."""
        if tool_use["name"] in self.requires_approval:
            return Approval(f"Allow {tool_use['name']}?")
        return None

    def question(self, interrupt: Interrupt) -> Question:
        """What a person is asked for `event.interrupt(name, reason=...)`: a string reason
        is the prompt; a dict gives `prompt` (or `question`) and `options`, and is sent
        whole as the payload; otherwise the reason is the payload."""
        return question_of(interrupt.reason)

    async def run(self, run: Run, text: str) -> None:
        agent = type(self).agent()
        if agent.model.stateful:
            raise TypeError("a model that keeps the conversation on its server is not supported")
        bridge = Bridge(self, run)
        # A new list: the one the agent was built with may be shared (few-shot examples).
        agent.messages = [*agent.messages, *restored_messages(run.history)]
        agent.tool_executor = SequentialToolExecutor()
        agent.add_hook(bridge.added, MessageAddedEvent)
        # Registered last, so innermost: they see the model and the tool that really run.
        agent.add_middleware(InvokeModelStage.Wrap, bridge.model_call)
        agent.add_middleware(ExecuteToolStage.Wrap, bridge.tool_call)
        try:
            result = await agent.invoke_async(text, invocation_state=run.invocation_state)
            while result.stop_reason == "interrupt":
                if bridge.failure is not None:
                    raise bridge.failure
                responses: list[InterruptResponseContent] = [
                    {"interruptResponse": {"interruptId": i.id, "response": await bridge.ask(i)}}
                    for i in result.interrupts or ()
                ]
                result = await agent.invoke_async(responses, invocation_state=run.invocation_state)
        except BaseException:
            # Stopped, failed, or asking a person: what it finished joins the history (an
            # answer replays the run from its start instead; a stop keeps this).
            keep(run.history, settled(bridge.messages(), "".join(bridge.unfinished)))
            raise
        keep(run.history, bridge.messages())
        if result.structured_output is not None:  # the reply, as JSON
            await run.say(result.structured_output.model_dump_json())


def restored_messages(history: Sequence[dict[str, Any]]) -> Messages:
    """The agent's messages of the conversation so far, oldest first."""
    return [
        decode_bytes_values(m)
        for entry in history
        if entry.get("role") == HISTORY_ROLE
        for m in entry["messages"]
    ]


def keep(history: MutableSequence[dict[str, Any]], messages: Messages) -> None:
    if messages:
        history.append({"role": HISTORY_ROLE, "messages": encode_bytes_values(messages)})


def settled(messages: Messages, unfinished: str) -> Messages:
    """What a stopped or failed run leaves for the next one: its messages without the tool
    calls whose results never joined them, and what the model was saying when it stopped."""
    kept = list(messages)
    if kept and kept[-1]["role"] == "assistant":
        content = [block for block in kept[-1]["content"] if "toolUse" not in block]
        kept[-1:] = [{**kept[-1], "content": content}] if content else []
    if unfinished and (not kept or kept[-1]["role"] != "assistant"):
        kept.append({"role": "assistant", "content": [{"text": unfinished}]})
    return kept


def alternating(messages: Messages) -> Messages:
    """The messages with consecutive ones of one role joined into one."""
    joined: Messages = []
    for message in messages:
        if joined and joined[-1]["role"] == message["role"]:
            content = [*joined[-1]["content"], *message["content"]]
            joined[-1] = {"role": message["role"], "content": content}
        else:
            joined.append(message)
    return joined


class Halted(Exception):
    """A tool stopped at an interrupt of its own (`tool_context.interrupt`)."""


@dataclass
class Bridge:
    """Routes one run's model calls, tool calls and new messages through the thinwire run."""

    owner: StrandsAgent
    run: Run
    #: The messages the run added, by their tracking id: one Strands rewrote keeps its place.
    added_messages: dict[str, Message] = field(default_factory=dict)
    #: What the model has said of the call in flight.
    unfinished: list[str] = field(default_factory=list)
    #: Why the run must fail once the agent has stopped.
    failure: Exception | None = None

    def added(self, event: MessageAddedEvent) -> None:
        self.added_messages[event.message["tracking_id"]] = event.message

    def messages(self) -> Messages:
        return list(self.added_messages.values())

    async def ask(self, interrupt: Interrupt) -> Any:
        question = self.owner.question(interrupt)
        return await self.run.interrupt(
            question.prompt, options=question.options, payload=question.payload
        )

    async def model_call(
        self, context: InvokeModelContext, next_call: MiddlewareNext[InvokeModelContext, Any]
    ) -> AsyncGenerator[Any, None]:
        async for event in next_call(context.replace(model=RecordedModel(context.model, self))):
            yield event

    async def tool_call(
        self, context: ExecuteToolContext, next_call: MiddlewareNext[ExecuteToolContext, Any]
    ) -> AsyncGenerator[Any, None]:
        if context.tool is None or isinstance(context.tool, StructuredOutputTool):
            # No such tool, or Strands' check of a structured output, which keeps what it
            # read in the invocation's context: nothing else runs, and a replay needs it.
            async for event in next_call(context):
                yield event
            return
        tool_use = context.tool_use
        # By the name of the tool that runs: a hook may have picked it for a call whose
        # name, the model's own, matches no tool (and only declared names are shown).
        name, call_id = context.tool.tool_name, tool_use["toolUseId"]
        passed: list[TypedEvent] = []  # what the tool streamed: after its result is known
        ended: list[ToolResultEvent] = []

        async def call(**_: Any) -> Any:  # the arguments as recorded: JSON, not these
            if not isinstance(tool_use["input"], dict):
                raise TypeError(f"the input of tool {name!r} is not a JSON object")
            async for event in next_call(context):
                (ended if isinstance(event, ToolResultEvent) else passed).append(event)
            if not ended:
                raise Halted(f"tool {name!r} asked a person itself (tool_context.interrupt)")
            result = ended[-1].tool_result
            if result["status"] == "error":
                raise RuntimeError(text_of(result)) from ended[-1].exception
            return encode_bytes_values(result["content"])

        # Recorded as an object, as every tool's arguments are: other JSON under "input".
        given = tool_use["input"]
        arguments = given if isinstance(given, dict) else {"input": given}
        exception: Exception | None
        try:
            content = await self.run.call_tool(
                name, call, arguments, approval=self.owner.approval(tool_use), call_id=call_id
            )
        except Rejected as rejected:  # in the history already, as the call's error
            result, exception = answer(call_id, "error", [{"text": REJECTED}]), rejected
        except ToolFailed as failed:
            if isinstance(failed.__cause__, Halted):
                self.failure = RuntimeError(
                    f"{failed.__cause__}: StrandsAgent takes interrupts from hooks and "
                    "middleware, and approvals from requires_approval and approval()"
                )
                for event in passed:  # the tool's interrupt: the agent stops there
                    yield event
                return
            # Its recorded text, so the model reads the same error live and on replay.
            error = self.run.history[-1]["error"]
            result, exception = answer(call_id, "error", [{"text": error}]), failed
        else:
            result, exception = answer(call_id, "success", decode_bytes_values(content)), None
        for event in passed:
            yield event
        yield ToolResultEvent(result, exception=exception)

    async def show(self, event: StreamEvent) -> None:
        delta = event.get("contentBlockDelta", {}).get("delta", {})
        if "text" in delta:
            self.unfinished.append(delta["text"])
            await self.run.say(delta["text"])
        elif "reasoningContent" in delta:
            await self.run.think(delta["reasoningContent"].get("text") or "")


def answer(call_id: str, status: Literal["success", "error"], content: Any) -> ToolResult:
    return {"toolUseId": call_id, "status": status, "content": content}


def text_of(result: ToolResult) -> str:
    return "\n".join(block["text"] for block in result["content"] if "text" in block)


class RecordedModel(Model):
    """The model of one model call, the call a recorded step of the run. Everything else
    is the wrapped model's own."""

    def __init__(self, wrapped: Model, bridge: Bridge) -> None:
        self.wrapped = wrapped
        self.bridge = bridge
        self._supports_structured_output = wrapped._supports_structured_output

    def __getattr__(self, name: str) -> Any:  # its `config`, and any attribute of its own
        return getattr(vars(self).get("wrapped"), name)  # `vars`: also before __init__

    def update_config(self, **model_config: Any) -> None:
        self.wrapped.update_config(**model_config)

    def get_config(self) -> Any:
        return self.wrapped.get_config()

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        return self.wrapped.structured_output(*args, **kwargs)

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        live = partial(self.live, messages, tool_specs, system_prompt, kwargs)
        for event in await self.bridge.run.step(STEP, live):
            yield decode_bytes_values(event)

    async def live(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None,
        system_prompt: str | None,
        options: dict[str, Any],
    ) -> list[Any]:
        """Stream the model's answer to the user; its events, as JSON."""
        run = self.bridge.run
        self.bridge.unfinished.clear()
        events: list[Any] = []
        usage: dict[str, Any] = {}
        stream = self.wrapped.stream(alternating(messages), tool_specs, system_prompt, **options)
        # Closed also when the run is cancelled between two events, not only inside one.
        async with contextlib.aclosing(cast(AsyncGenerator[StreamEvent, None], stream)):
            async for event in stream:
                events.append(encode_bytes_values(event))
                await self.bridge.show(event)
                usage = dict(event.get("metadata", {}).get("usage", usage))
        self.bridge.unfinished.clear()
        run.record_usage(
            model_name(self.wrapped), usage.get("inputTokens", 0), usage.get("outputTokens", 0)
        )
        return events


def model_name(model: Model) -> str:
    config = model.get_config()
    name = config.get("model_id") if isinstance(config, dict) else None
    return str(name or type(model).__name__)
