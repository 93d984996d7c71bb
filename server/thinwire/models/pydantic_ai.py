"""PydanticAIAgent: a pydantic-ai `Agent` you already built, served by thinwire.

    support = PydanticAgent("openai:gpt-4.1-mini", instructions="You help with orders.")

    class Support(PydanticAIAgent):
        agent = support

The agent runs as it would on its own, with one capability of ours added for the run:

- every model request is a recorded step (`run.step`): streamed as it comes (thinking to
  `think`; text to `say` when the agent's output is text), its tokens counted
  (`record_usage`), its response kept in the journal, so a resumed run replays it instead
  of asking the model again;
- the reply kept is the agent's output: a structured one said as JSON at the end, a text
  one after what the model said before its tool calls, without a draft pydantic-ai sent
  back (`run.replace_text`);
- every tool call goes through `run.call_tool`: the user sees the tool's name, the
  history keeps its arguments and output (JSON), a resumed run replays it. Tool calls run
  one at a time, so a replay meets them in the order they ran: pydantic-ai's, the calls
  that need no approval first, in the model's order, then those that do, each once a
  person has answered;
- a call that needs approval (`requires_approval=True`, or a tool raising
  `ApprovalRequired`) asks a person with `run.interrupt`; a rejection reaches the model
  as pydantic-ai's own `ToolDenied`;
- the agent's messages are kept in `run.history`, one `{"role": "pydantic-ai",
  "messages": [...]}` entry per run (pydantic-ai's `ModelMessagesTypeAdapter` JSON), and
  given back as `message_history` on the next run of the conversation.

Deliberate divergences: a tool's result reaches the model as its JSON (what the journal
can replay; a `ToolReturn` and multimodal content are rebuilt from it), and calls that
run outside the agent (`CallDeferred`, external tools) are not answered: the run fails.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, MutableSequence, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, ClassVar

from pydantic import TypeAdapter

from thinwire.agent import REJECTED, Agent, Run, described
from thinwire.interrupts import APPROVAL_OPTIONS, Approval, ToolFailed

try:
    from pydantic_ai import (
        ApprovalRequired,
        CallDeferred,
        DeferredToolRequests,
        DeferredToolResults,
        ModelRetry,
        RunContext,
        ToolDenied,
        capture_run_messages,
    )
    from pydantic_ai import ToolFailed as ToolFailure
    from pydantic_ai.agent import AbstractAgent
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        ModelResponseStreamEvent,
        PartDeltaEvent,
        PartStartEvent,
        RetryPromptPart,
        TextPart,
        TextPartDelta,
        ThinkingPart,
        ThinkingPartDelta,
        ToolCallPart,
        ToolReturn,
        ToolReturnPart,
        tool_return_content_ta,
    )
    from pydantic_ai.models import CompletedStreamedResponse, Model, ModelRequestParameters
    from pydantic_ai.models.wrapper import WrapperModel
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tool_manager import ToolManager
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool, WrapperToolset
    from pydantic_ai.usage import UsageLimits
except ImportError as exc:  # pragma: no cover - exercised with the extra uninstalled
    raise ImportError(
        'PydanticAIAgent needs pydantic-ai: pip install "thinwire[pydantic-ai]"'
    ) from exc

__all__ = ["HISTORY_ROLE", "PydanticAIAgent", "restored_messages"]

#: The role of the history entries that hold the agent's own messages.
HISTORY_ROLE = "pydantic-ai"
#: The name of a model request in the run's journal.
STEP = "pydantic-ai:model"

tool_return_ta: TypeAdapter[ToolReturn[Any]] = TypeAdapter(ToolReturn)


class PydanticAIAgent(Agent):
    """A thinwire agent that runs `agent`, a pydantic-ai agent, on every message."""

    #: The pydantic-ai agent (an `Agent`, or anything built on `AbstractAgent`).
    agent: ClassVar[AbstractAgent[Any, Any]]

    @classmethod
    def check_class(cls) -> None:
        super().check_class()
        name, agent = cls.__name__, getattr(cls, "agent", None)
        if agent is None:
            raise TypeError(f'{name} has no agent: set agent = Agent("openai:gpt-4.1-mini", …)')
        if not isinstance(agent, AbstractAgent):
            raise TypeError(
                f"{name}.agent must be a pydantic-ai agent (an Agent, or anything built on "
                f"AbstractAgent), not {described(agent)}"
            )

    def deps(self, run: Run) -> Any:
        """The agent's dependencies (`deps=`) for this run; None by default."""
        return None

    def usage_limits(self, run: Run) -> UsageLimits | None:
        """The run's limits (`usage_limits=`); None by default: pydantic-ai's own."""
        return None

    def model_settings(self, run: Run) -> ModelSettings | None:
        """The run's model settings (`model_settings=`), over the agent's; None by default."""
        return None

    def approval(self, call: ToolCallPart, metadata: dict[str, Any] | None) -> Approval:
        """What a person is asked before `call` runs. Public: shown as it is. The
        arguments are not shown unless you put them here."""
        return Approval(f"Allow {call.tool_name}?")

    async def run(self, run: Run, text: str) -> None:
        bridge = Bridge(self, run)
        earlier = run.text  # an agent that handed off to this one said it: kept as said
        run_id = str(uuid.uuid4())  # its messages' mark: what this run added to the history
        with capture_run_messages() as messages, ToolManager.parallel_execution_mode("sequential"):
            try:
                result: AgentRunResult[Any] = await self.agent.run(
                    text,
                    message_history=restored_messages(run.history),
                    conversation_id=run.context_id,
                    run_id=run_id,
                    deps=self.deps(run),
                    usage_limits=self.usage_limits(run),
                    model_settings=self.model_settings(run),
                    capabilities=[bridge],
                )
            except BaseException:
                # Stopped, failed, or asking a person: what it finished joins the history
                # (an answer replays the run from its start instead; a stop keeps this).
                ours = [m for m in messages if m.run_id == run_id]
                keep(run.history, settled(ours, "".join(bridge.unfinished)))
                raise
        keep(run.history, result.new_messages())
        if isinstance(result.output, DeferredToolRequests):
            raise RuntimeError("the agent waits for calls that run outside it (CallDeferred)")
        output = result.output
        if not isinstance(output, str):  # a structured output is the reply, as JSON
            output = json.dumps(tool_return_content_ta.dump_python(output, mode="json"))
        reply = "".join(bridge.before_tools) + output
        said = run.text[len(earlier) :]
        if not said:
            await run.say(reply)
        elif said != reply:  # it said a draft that was sent back, or that was changed
            run.replace_text(earlier + reply)


def restored_messages(history: Sequence[dict[str, Any]]) -> list[ModelMessage]:
    """The agent's messages of the conversation so far, oldest first."""
    stored = [
        m for entry in history if entry.get("role") == HISTORY_ROLE for m in entry["messages"]
    ]
    return ModelMessagesTypeAdapter.validate_python(stored)


def keep(history: MutableSequence[dict[str, Any]], messages: Sequence[ModelMessage]) -> None:
    if messages:
        dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
        history.append({"role": HISTORY_ROLE, "messages": dumped})


def settled(messages: list[ModelMessage], unfinished: str) -> list[ModelMessage]:
    """What a stopped or failed run leaves for the next one: its finished messages, the
    tool calls of its last response that have their answers (those pydantic-ai collected
    in the request it was assembling) with those answers, and what the model was saying
    when it stopped. A call without its answer is left out: chat APIs refuse it."""
    kept = [m for m in messages if m.state != "interrupted"]
    last = messages[-1] if messages else None
    # The request pydantic-ai was assembling: the answers it had collected.
    collected = last if isinstance(last, ModelRequest) and last.state == "interrupted" else None
    response = kept[-1] if kept else None
    if isinstance(response, ModelResponse):
        kept.pop()
        calls = {p.tool_call_id for p in response.parts if isinstance(p, ToolCallPart)}
        answers = [
            part
            for part in (collected.parts if collected is not None else [])
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id in calls
        ]
        answered = {part.tool_call_id for part in answers}
        parts = [
            p
            for p in response.parts
            if not isinstance(p, ToolCallPart) or p.tool_call_id in answered
        ]
        kept += [replace(response, parts=parts)] if parts else []
        if collected is not None and answers:
            kept.append(replace(collected, parts=answers, state="complete"))
    if unfinished and kept and not isinstance(kept[-1], ModelResponse):
        kept.append(ModelResponse(parts=[TextPart(unfinished)]))
    return kept


@dataclass
class Bridge(AbstractCapability[Any]):
    """The run's capability: routes the agent's model requests, tool calls and approvals
    through the thinwire run."""

    owner: PydanticAIAgent
    run: Run
    #: What the model has said of the request in flight.
    unfinished: list[str] = field(default_factory=list)
    #: Whether its text is streamed: only when the agent's output is text. Otherwise the
    #: text is a structured output's JSON, or what the model said besides it.
    says_text: bool = True
    #: What the model said, streamed, in the responses with tool calls: the reply's start.
    before_tools: list[str] = field(default_factory=list)

    def get_wrapper_model(self, model: Model) -> Model:
        return RecordedModel(model, self)

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        return RecordedToolset(toolset, self.run)

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        if not requests.approvals:
            return None  # calls that run elsewhere: left to pydantic-ai, which fails the run
        results = DeferredToolResults()
        for call in requests.approvals:
            approval = self.owner.approval(call, requests.metadata.get(call.tool_call_id))
            decision = await self.run.interrupt(
                approval.prompt, options=APPROVAL_OPTIONS, payload=approval.payload
            )
            if decision == "approve":
                results.approvals[call.tool_call_id] = True
                continue
            results.approvals[call.tool_call_id] = ToolDenied()
            self.run.history.append(
                {
                    "role": "tool",
                    "name": call.tool_name,
                    "arguments": call.args_as_dict(),
                    "callId": call.tool_call_id,
                    "ok": False,
                    "error": REJECTED,
                }
            )
        return results

    async def show(self, event: ModelResponseStreamEvent) -> None:
        if isinstance(event, PartStartEvent):
            if isinstance(event.part, TextPart):
                await self.said(event.part.content)
            elif isinstance(event.part, ThinkingPart):
                await self.run.think(event.part.content)
        elif isinstance(event, PartDeltaEvent):
            if isinstance(event.delta, TextPartDelta):
                await self.said(event.delta.content_delta)
            elif isinstance(event.delta, ThinkingPartDelta):
                await self.run.think(event.delta.content_delta or "")

    async def said(self, delta: str) -> None:
        self.unfinished.append(delta)
        if self.says_text:
            await self.run.say(delta)


class RecordedModel(WrapperModel):
    """The agent's model, each request a recorded step of the run."""

    def __init__(self, wrapped: Model, bridge: Bridge) -> None:
        super().__init__(wrapped)
        self.bridge = bridge

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        return await self.recorded(messages, model_settings, model_request_parameters, None)

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[CompletedStreamedResponse]:
        response = await self.recorded(
            messages, model_settings, model_request_parameters, run_context
        )
        yield CompletedStreamedResponse(
            response, model_request_parameters=model_request_parameters, replay_events=True
        )

    async def recorded(
        self,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None,
    ) -> ModelResponse:
        live = partial(self.live, messages, settings, parameters, run_context)
        dumped = await self.bridge.run.step(STEP, live)
        [response] = ModelMessagesTypeAdapter.validate_python([dumped])
        assert isinstance(response, ModelResponse)
        return response

    async def live(
        self,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None,
    ) -> dict[str, Any]:
        """Ask the model, its deltas streamed to the user; the response as JSON."""
        bridge = self.bridge
        bridge.unfinished.clear()
        bridge.says_text = parameters.output_mode == "text"
        async with self.wrapped.request_stream(
            messages, settings, parameters, run_context
        ) as stream:
            async for event in stream:
                await bridge.show(event)
            response = stream.get()
        if bridge.says_text and any(isinstance(p, ToolCallPart) for p in response.parts):
            bridge.before_tools += bridge.unfinished  # not the output: what led to the calls
        bridge.unfinished.clear()
        usage = response.usage
        bridge.run.record_usage(
            response.model_name or self.model_name, usage.input_tokens, usage.output_tokens
        )
        [dumped] = ModelMessagesTypeAdapter.dump_python([response], mode="json")
        result: dict[str, Any] = dumped
        return result


class Outcome(Exception):
    """A tool's answer that is not a result (a retry, a failure, a deferral), as the
    history records it: `"<kind>: <detail>"`."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")


@dataclass
class RecordedToolset(WrapperToolset[Any]):
    """The agent's tools, each call made through `run.call_tool`."""

    run: Run

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        async def call(**_: Any) -> Any:  # the arguments as recorded: JSON, not these
            return await self.answer(name, tool_args, ctx, tool)

        arguments = tool_return_content_ta.dump_python(tool_args, mode="json")
        try:
            output = await self.run.call_tool(name, call, arguments, call_id=ctx.tool_call_id)
        except ToolFailed as failed:
            cause = failed.__cause__
            if cause is not None and not isinstance(cause, Outcome):
                raise cause from None  # the tool crashed: as pydantic-ai would have it
            raise answer_of(self.run.history[-1]["error"]) from None
        if isinstance(output, dict) and output.get("kind") == "tool-return":
            return tool_return_ta.validate_python(output)
        return tool_return_content_ta.validate_python(output)

    async def answer(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """The tool's result as JSON; its other answers as an `Outcome` to record."""
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except ModelRetry as exc:
            raise Outcome("ModelRetry", exc.message) from exc
        except ToolFailure as exc:
            raise Outcome("ToolFailed", exc.message) from exc
        except ApprovalRequired as exc:
            raise Outcome("ApprovalRequired", json.dumps(exc.metadata)) from exc
        except CallDeferred as exc:
            raise Outcome("CallDeferred", json.dumps([exc.metadata, exc.kind])) from exc
        if isinstance(result, ToolReturn):
            return tool_return_ta.dump_python(result, mode="json")
        return tool_return_content_ta.dump_python(result, mode="json")


def answer_of(error: str) -> Exception:
    """The exception a tool raised, from its record; the same one live and on replay."""
    kind, _, detail = error.partition(": ")
    if kind == "ModelRetry":
        return ModelRetry(detail)
    if kind == "ToolFailed":
        return ToolFailure(detail)
    if kind == "ApprovalRequired":
        return ApprovalRequired(json.loads(detail))
    if kind == "CallDeferred":
        metadata, call_kind = json.loads(detail)
        return CallDeferred(metadata, kind=call_kind)
    return RuntimeError(error)  # a crash recorded before a suspension (a capability recovered)
