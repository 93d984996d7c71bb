"""ChatAgent: an agent that is a chat model with tools.

    class Librarian(ChatAgent):
        model = OpenAIChat("gpt-4.1-mini")
        system_prompt = "You help people find books."

        @tool
        async def search(self, query: str) -> list[str]:
            \"\"\"Search the catalogue.\"\"\"
            return await catalogue.search(query)

Each step shows the model the conversation (the latest turn whole, and the earlier turns
that fit with it in `history_window` messages: see `to_chat_messages`), streams its
answer, runs the tools it calls — each through `run.call_tool`, so their arguments and
outputs stay on the server and only their names cross the wire — and goes on until the
model stops calling tools or `max_steps` is reached. Every model call is a recorded
step of the run (`run.step`): a run resumed after a decision replays the model's
recorded answers instead of calling it again. Parallel tool calls of one step run one
after the other, in the order the model gave them, so a replay meets them in that order.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic_core import to_jsonable_python

from thinwire.agent import Agent, Run, described
from thinwire.interrupts import Rejected, ToolFailed
from thinwire.models.base import ChatModel, ModelTurn, ToolCall, checked_turn
from thinwire.models.messages import model_turn, to_chat_messages
from thinwire.models.openai import OpenAIChat
from thinwire.models.tools import ToolInputError, ToolSpec, tools_of

__all__ = ["ChatAgent"]

logger = logging.getLogger("thinwire.models")


class ChatAgent(Agent):
    #: The model (an `OpenAIChat`, or anything with `name` and `complete`).
    model: ClassVar[ChatModel]
    #: Model calls per run at most; a model still calling tools then is stopped there.
    max_steps: ClassVar[int] = 10
    #: Chat messages shown to the model besides the system prompt, the latest turn's
    #: included, in whole turns; the latest turn is shown whole however long, so an
    #: earlier turn is shown only if it fits with it (`to_chat_messages`).
    history_window: ClassVar[int] = 50

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        tools_of(cls)  # two tools of one name are refused now, not one dropped in silence
        for attribute, value in vars(cls).items():
            # A tool method named `run` or `call` would replace ChatAgent's own: every run
            # would then fail, far from the cause.
            if hasattr(value, "__thinwire_tool__") and hasattr(ChatAgent, attribute):
                raise TypeError(
                    f"{cls.__name__}.{attribute} is a tool, and hides ChatAgent.{attribute}: "
                    f"give the method another name (@tool(name={attribute!r}) keeps the name "
                    "the model sees)"
                )

    @classmethod
    def check_class(cls) -> None:
        name, model = cls.__name__, getattr(cls, "model", None)
        # Checked before the base class's check, which would name its own unit.
        window = cls.history_window
        if isinstance(window, bool) or not isinstance(window, int):
            raise TypeError(
                f"{name}.history_window must be an int, a number of chat messages, not {window!r}"
            )
        if window < 1:
            raise ValueError(
                f"{name}.history_window must be at least 1 (chat messages), not {window!r}"
            )
        super().check_class()
        if model is None:
            raise TypeError(
                f'{name} has no model: set model = OpenAIChat("gpt-4.1-mini"), or any chat '
                "model (a name and an async complete)"
            )
        if not isinstance(getattr(model, "name", None), str) or not callable(
            getattr(model, "complete", None)
        ):
            raise TypeError(
                f"{name}.model must be a chat model, such as an OpenAIChat: an object with a "
                f"name (str) and an async complete, not {described(model)}"
            )
        steps = cls.max_steps
        if isinstance(steps, bool) or not isinstance(steps, int):
            raise TypeError(f"{name}.max_steps must be an int, not {type(steps).__name__}")
        if steps < 1:
            raise ValueError(f"{name}.max_steps must be an int of at least 1, not {steps!r}")
        if isinstance(model, OpenAIChat):
            model.check_key(name)

    @classmethod
    async def aclose(cls) -> None:
        # A class the app never checked (a factory's) may have no model: nothing to close.
        close = getattr(getattr(cls, "model", None), "aclose", None)
        if close is not None:
            await close()

    async def run(self, run: Run, text: str) -> None:
        tools = tools_of(type(self))
        schemas = [spec.schema for spec in tools.values()]
        for _ in range(self.max_steps):
            messages = to_chat_messages(run.history, self.history_window)
            turn = await run.step(
                f"model:{self.model.name}", functools.partial(self.ask, run, messages, schemas)
            )
            calls = turn["toolCalls"]
            run.history.append(model_turn(turn["content"], [parsed(call) for call in calls]))
            if not calls:
                return
            for call in calls:
                await self.call(run, tools, call)
        logger.info("%s stopped after %d model calls", run.context_id, self.max_steps)

    async def ask(
        self, run: Run, messages: list[dict[str, Any]], schemas: list[dict[str, Any]]
    ) -> ModelTurn:
        """One model call, its deltas streamed to the user, its tokens counted."""
        turn = checked_turn(await self.model.complete(messages, schemas, run), self.model)
        usage = turn.get("usage")
        if usage:
            run.record_usage(self.model.name, usage["inputTokens"], usage["outputTokens"])
        return turn

    async def call(self, run: Run, tools: Mapping[str, ToolSpec], call: ToolCall) -> None:
        """Run one tool call; whatever goes wrong — a person's rejection too — is the
        model's to hear, as the call's error."""
        spec = tools.get(call["name"])
        arguments = parsed(call)["arguments"]
        if spec is None:
            # The name is the model's own (a prompt injection's, maybe), and only declared
            # names cross the wire: no frames, and nothing runs, so nothing to replay.
            run.history.append(
                {
                    "role": "tool",
                    "name": call["name"],
                    "arguments": arguments,
                    "callId": call["id"],
                    "ok": False,
                    "error": f"there is no tool {call['name']!r}",
                }
            )
            return
        given = object_of(call["arguments"])
        approval = None
        runs = False  # the tool itself, not a refusal of the model's call
        if given is None:
            # Never validated as {"text": …}: a tool taking `text` would run on it.
            function = refuse("the arguments are not a JSON object")
        else:
            try:
                valid = spec.validate(given)
            except ToolInputError as exc:
                function = refuse(str(exc))
            else:
                approval = spec.approval_for(valid)
                function = with_arguments(spec.bound(self), valid)
                arguments = valid_json(valid, arguments)
                runs = True
        # A failure or a rejection is in the history as the call's error: the model reads it.
        try:
            await run.call_tool(
                call["name"], function, arguments, approval=approval, call_id=call["id"]
            )
        except ToolFailed as failed:
            # The tool's own failure (a bug, an output that is not JSON) is the developer's
            # to see too, with its traceback, and its arguments left out, as the runner
            # leaves them out. Replayed, it has no cause: it was logged when it happened.
            if runs and failed.__cause__ is not None:
                logger.warning(
                    "Tool %r of %s failed in %s (run %s); the model is told its error",
                    call["name"],
                    type(self).__name__,
                    run.context_id,
                    run.run_id,
                    exc_info=failed.__cause__,
                )
        except Rejected:
            pass


def parsed(call: ToolCall) -> dict[str, Any]:
    """The call as the history records it, its arguments a JSON object: text that is not
    one is kept under "text", so the chat API is sent JSON when it is shown again (the
    call does not run, see `call`)."""
    arguments = object_of(call["arguments"])
    if arguments is None:
        arguments = {"text": call["arguments"]}
    return {"id": call["id"], "name": call["name"], "arguments": arguments}


def object_of(arguments: str) -> dict[str, Any] | None:
    """The model's arguments as a JSON object (none given: an empty one); None when they
    are not one."""
    try:
        value = json.loads(arguments or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def valid_json(valid: Mapping[str, Any], fallback: dict[str, Any]) -> dict[str, Any]:
    """The validated arguments as JSON, to record; the model's own when they are not."""
    try:
        value = to_jsonable_python(dict(valid))
    except Exception:
        return fallback
    return value if isinstance(value, dict) else fallback


def with_arguments(function: Any, valid: Mapping[str, Any]) -> Any:
    """The tool, called with the validated arguments (a date as a date, a model as a
    model) while the history records them as JSON."""

    async def call(**_: Any) -> Any:
        return await function(**valid)

    return call


def refuse(reason: str) -> Any:
    async def refused(**_: Any) -> Any:
        raise ToolInputError(reason)

    return refused
