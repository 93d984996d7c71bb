"""The agent API: what user code implements and what the kit hands it during a run.

An agent is a class with a `run(run, text)` coroutine. The kit creates one instance per
live context and, for every user message, passes a `Run` that gives the agent its memory
(history, AgentState, invocationState) and the only way to reach the user: public events.

    class Echo(Agent):
        system_prompt = "You repeat what you hear."

        async def run(self, run: Run, text: str) -> None:
            await run.think("Repeating.")
            await run.say(text)

Everything the agent keeps in `run.history`, `run.state`, `run.invocation_state` or
`run.shared_state` stays on the server. Only `think`, `say` and the names of tools passed
to `tool` become frames.

A `Run` is only good until its run ends. Work that outlives it (a task the agent started
and did not wait for) gets `RunEnded` from anything that would show or record something —
`say`, a tool, a write to `run.state` or `run.history`, a title — so nothing of it lands
in the conversation, in this run or the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
from collections.abc import (
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Iterator,
    Mapping,
    MutableMapping,
    Sequence,
)
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel

from thinwire import wire
from thinwire.errors import RunTooLong, StateValueError
from thinwire.exchanges import Exchange, History
from thinwire.interrupts import (
    APPROVAL_OPTIONS,
    Approval,
    Journal,
    Rejected,
    Suspend,
    ToolFailed,
    new_interrupt_id,
)
from thinwire.jsontext import encodable, is_unicode, replace_unencodable
from thinwire.jsonvalues import JSONValue, a_value_of, check_json
from thinwire.records import (
    MODEL_NAME_LENGTH,
    TITLE_LENGTH,
    Shown,
    shortened,
    visible,
    without_controls,
)
from thinwire.state import AgentState, check_key, check_source

if TYPE_CHECKING:
    from thinwire.a2a.card import Skill
    from thinwire.runlog import RunLog

__all__ = ["Agent", "Run", "RunEnded", "RunHistory", "RunState"]

T = TypeVar("T")

#: A call that waited for a person's approval, in the history of a run stopped meanwhile.
UNANSWERED = "a person was asked to approve this call; the run was stopped first, so it did not run"
#: A call a person rejected, in the history.
REJECTED = "a person rejected this call; it did not run"
#: A call the run's end cut short (a stop, a shutdown), in the history.
CUT_SHORT = "the run ended before this call returned; it may have partly run"
#: A call of a plain function (`NotAsync`), in the history.
NOT_AWAITED = (
    "this call was to a plain function, not an async one: it ran, and what it returned was not kept"
)

#: What each value the run keeps is for, said when one is not JSON.
PAYLOAD_RULE = "an interrupt's payload is sent to the user as JSON, so JSON values only"
ARGUMENTS_RULE = "a tool's arguments are recorded in run.history, so JSON values only"
OUTPUT_RULE = "a tool's output is recorded in run.history, so JSON values only"
RESULT_RULE = "a step's result is recorded for a resume to return, so JSON values only"
SCHEMA_RULE = "an interrupt's schema is sent to the user as JSON, so JSON values only"
INITIAL_STATE_RULE = "it is copied into every new conversation's AgentState, so JSON values only"


def described(value: object) -> str:
    """What a wrong setting is, for the sentence refusing it: a str as it is (one key name
    where a set of them goes), a collection by the first thing it holds that is no str."""
    if isinstance(value, str | bytes):
        return f"the {type(value).__name__} {value!r}"
    if isinstance(value, type):
        return f"the class {value.__name__} (an instance of it goes there)"
    if isinstance(value, Collection) and not isinstance(value, Mapping):
        for item in value:
            if not isinstance(item, str):
                return f"{a_value_of(value)} holding {a_value_of(item)}"
    return a_value_of(value)


class Agent:
    """Base class for agents. Override `run`; set the class attributes to configure it.

    `initial_state` seeds each new context's AgentState (audited with source "system");
    `writable_keys`, when not None, is the only set of keys anyone may write afterwards;
    `history_window`, when not None, bounds how much of a long conversation a run loads.
    """

    system_prompt: ClassVar[str] = ""
    initial_state: ClassVar[Mapping[str, Any]] = {}
    writable_keys: ClassVar[frozenset[str] | None] = None
    #: How many of the latest exchanges (a message and its reply) a run reads (None: all
    #: of them). A send then loads only those, however long the conversation: its
    #: `run.history` is the system prompt and the latest `history_window` exchanges.
    history_window: ClassVar[int | None] = None
    #: The most an AgentState value may take, as JSON in UTF-8 (None: no limit): a
    #: larger write raises `StateValueError`. Every value written is kept in the audit
    #: trail, so the store grows by each one.
    max_state_value_bytes: ClassVar[int | None] = 1024 * 1024
    #: Show each reply's model and tokens with it in the transcript (`meta`); by default
    #: they are counted on the server only (the operator API reads them).
    public_usage: ClassVar[bool] = False
    #: What the agent does, in a sentence: public, its A2A agent card shows it.
    description: ClassVar[str] = ""
    #: What it can be asked to do, for its A2A agent card (public; `thinwire.a2a.Skill`).
    skills: ClassVar[Sequence[Skill]] = ()

    async def run(self, run: Run, text: str) -> None:
        raise NotImplementedError

    @classmethod
    def check_class(cls) -> None:
        """Refuse, in a sentence naming the class and the attribute, a setting that would
        fail every conversation: `create_app` calls it for each Agent class it is given
        (a function making agents cannot be checked before it makes one). A subclass
        with settings of its own checks them after `super().check_class()`."""
        name = cls.__name__
        if not inspect.iscoroutinefunction(cls.run):
            raise TypeError(
                f"{name}.run must be a coroutine function (async def run(self, run, text)), "
                "not a plain def: the kit awaits it"
            )
        if not isinstance(cls.system_prompt, str):
            raise TypeError(
                f"{name}.system_prompt must be a str, not {type(cls.system_prompt).__name__}"
            )
        initial = cls.initial_state
        if not isinstance(initial, Mapping):
            raise TypeError(
                f"{name}.initial_state must be a mapping of str to JSON values, "
                f"not {type(initial).__name__}"
            )
        try:
            check_json(dict(initial), f"{name}.initial_state", rule=INITIAL_STATE_RULE)
        except StateValueError as exc:
            raise TypeError(str(exc)) from None
        for key in initial:
            try:
                check_key(key, f"{name}.initial_state")
            except StateValueError as exc:
                raise ValueError(str(exc)) from None
        check_count_or_none(
            f"{name}.max_state_value_bytes", cls.max_state_value_bytes, "bytes", "no limit"
        )
        check_count_or_none(
            f"{name}.history_window", cls.history_window, "exchanges", "the whole history"
        )
        keys = cls.writable_keys
        if keys is not None and (
            isinstance(keys, str | bytes | Mapping)
            or not isinstance(keys, Collection)
            or not all(isinstance(key, str) for key in keys)
        ):
            raise TypeError(
                f"{name}.writable_keys must be a set of key names (str), such as "
                f'frozenset({{"notes"}}), or None for every key, not {described(keys)}'
            )

    @classmethod
    async def aclose(cls) -> None:
        """Release what the class holds for all its conversations (a model's client);
        called when the app shuts down."""


class RunEnded(RuntimeError):
    """A `Run` was used after its run ended, by work that outlived it (a task the agent
    started and did not wait for): refused, so nothing of it is shown or recorded."""


class Handoff(Protocol):
    def __call__(self, agent_name: str, run: Run, text: str) -> Awaitable[None]: ...


class Run:
    """One execution of an agent for one user message."""

    def __init__(
        self,
        *,
        context_id: str,
        run_id: str,
        history: History,
        state: AgentState,
        log: RunLog,
        handoff: Handoff,
        shared_state: dict[str, Any] | None = None,
        journal: list[dict[str, Any]] | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        self.context_id = context_id
        self.run_id = run_id
        #: What the page sent with the message (`send(text, {data})`): public, untrusted
        #: input, like the text. Empty when it sent none.
        self.data: dict[str, Any] = copy.deepcopy(dict(data or {}))
        #: Why the run is over, once it is: from then on every use is refused (`end`).
        self._ended: str | None = None
        #: The agent's internal messages for this context (server-only, persisted).
        self.history = RunHistory(history, self)
        #: Key-value AgentState of this context (server-only, persisted, JSON values).
        self.state = RunState(state, self)
        self._state = state
        #: Scratch space shared by the tools of this agent's run only; dropped when it ends.
        self.invocation_state: dict[str, Any] = {}
        #: Shared, by reference, by every agent taking part in this run (see `handoff`);
        #: dropped when the run ends.
        self.shared_state: dict[str, Any] = {} if shared_state is None else shared_state
        self._log = log
        self._handoff = handoff
        self._text: list[str] = []
        self._tool_calls: list[str] = []
        #: What the reply shows besides its text, kept with it in the transcript.
        self._thinking: list[str] = []
        self._activity: list[dict[str, Any]] = []
        #: The model and tokens the agent made public (`record_usage(…, public=True)`).
        self.public_usage: dict[str, Any] = {}
        #: Whether `record_usage` makes them public by default (`Agent.public_usage`).
        self.usage_public = False
        #: The title the agent gave the conversation in this run, if any.
        self.title: str | None = None
        #: What this run did that a resume must not do again (see `thinwire.interrupts`).
        self._journal = Journal(journal)
        #: What a resumed run said before it was suspended (already shown to the user).
        self.replayed_text: list[str] = []
        #: Tokens per model, of the model calls of this run (see `record_usage`).
        self.usage: dict[str, dict[str, int]] = {}
        self._first_delta_sent = False

    def handed_to(self) -> Run:
        """The run another agent continues this one in: same reply, same shared state."""
        other = Run(
            context_id=self.context_id,
            run_id=self.run_id,
            history=self.history,
            state=self._state,
            log=self._log,
            handoff=self._handoff,
            shared_state=self.shared_state,
            data=self.data,
        )
        other._text = self._text
        other._tool_calls = self._tool_calls
        other._thinking = self._thinking
        other._activity = self._activity
        other.public_usage = self.public_usage
        other.usage_public = self.usage_public
        other._journal = self._journal
        other.replayed_text = self.replayed_text
        other.usage = self.usage
        other._first_delta_sent = self._first_delta_sent
        return other

    def end(self, why: str = "") -> None:
        """The run is over for this agent: this Run, and the history and state it hands
        out, refuse every use from now on (`RunEnded`, saying "has ended" and `why`)."""
        self._ended = why

    def end_tool_calls(self) -> None:
        """Show each tool call still running as not finished (as a stop shows the one it
        cuts short): once the run is over nothing more of it is shown (`end`), and no
        client must show it running for ever. Only the frame limit leaves one unshown."""
        for activity in self._activity:
            if activity["ok"] is None:
                activity["ok"] = False
                with contextlib.suppress(RunTooLong):
                    self._log.tool_result(activity["callId"], activity["name"], ok=False)

    def _refused(self, what: str) -> RunEnded:
        return RunEnded(
            f"run {self.run_id} has ended{self._ended}: {what} is refused. A Run is only "
            "good until its run ends: work that outlives it (a task the agent started and "
            "did not wait for) must not use it"
        )

    def _check_running(self, what: str) -> None:
        if self._ended is not None:
            raise self._refused(what)

    @property
    def text(self) -> str:
        """The reply streamed so far."""
        return "".join(self._text)

    @property
    def tool_calls(self) -> list[str]:
        """Names of the tools called so far, in call order."""
        return list(self._tool_calls)

    def shown(self) -> Shown:
        """What the reply showed besides its text: for the transcript."""
        meta: dict[str, Any] = {}
        if self.public_usage:
            meta["model"] = self.public_usage["model"]
            meta["usage"] = {
                "inputTokens": self.public_usage["inputTokens"],
                "outputTokens": self.public_usage["outputTokens"],
            }
        return Shown("".join(self._thinking), [dict(a) for a in self._activity], meta)

    @property
    def replaying(self) -> bool:
        """True while a resumed run re-runs what its journal recorded: frames are not sent
        again and tools return their recorded results."""
        return self._journal.replaying

    @property
    def journal(self) -> list[dict[str, Any]]:
        return self._journal.entries

    async def think(self, delta: str) -> None:
        """Stream a piece of public reasoning to the user."""
        if self._ended is not None:
            raise self._refused("run.think()")
        if not isinstance(delta, str):
            raise not_text("think", delta)
        check_text(delta, "the text given to run.think()")
        if delta and not self.replaying:
            self._thinking.append(delta)
            self._log.thinking(delta)
            if not self._first_delta_sent:
                await self._first_delta_out()

    async def say(self, delta: str) -> None:
        """Stream a piece of the reply to the user."""
        if self._ended is not None:  # one check: this is the per-token path
            raise self._refused("run.say()")
        if not isinstance(delta, str):
            raise not_text("say", delta)
        check_text(delta, "the text given to run.say()")
        if not delta:
            return
        if self.replaying:
            self.replayed_text.append(delta)
        else:
            self._text.append(delta)
            self._log.token(delta)
            if not self._first_delta_sent:
                await self._first_delta_out()

    def replace_text(self, text: str) -> None:
        """For adapters: keep `text` as the reply, in place of what the run said since
        it started (or resumed): a framework's output that is not all its model said, a
        draft its validator rejected say. After a handoff that is the agents' reply so
        far, so keep the part said before yours (`run.text` when your agent began). At
        the end, not inside a step. The deltas sent stay sent; the run's `done` and the
        transcript have `text`, which a client shows in their place."""
        self._check_running("run.replace_text()")
        if not isinstance(text, str):
            raise not_text("replace_text", text)
        check_text(text, "the text given to run.replace_text()")
        self._text[:] = [text] if text else []  # in place: a handoff's run shares it

    async def _first_delta_out(self) -> None:
        """After the run's first delta, let the event loop go round once so the streams
        send it now: an agent that says a burst without awaiting would otherwise hold its
        first token back until the whole burst is said."""
        self._first_delta_sent = True
        await asyncio.sleep(0)

    async def handoff(self, agent_name: str, text: str) -> None:
        """Let another agent of this server continue this run.

        It streams into the same reply and shares this run's `shared_state`, the
        conversation's history and AgentState; its `invocation_state` is its own.
        """
        self._check_running("run.handoff()")
        if not isinstance(text, str):
            raise not_text("handoff", text)
        check_text(text, "the text given to run.handoff()")
        await self._handoff(agent_name, self, text)

    async def interrupt(
        self,
        prompt: str,
        *,
        options: list[str] | None = None,
        payload: Any = None,
        schema: type[BaseModel] | None = None,
    ) -> Any:
        """Ask a person and return their decision.

        The run is suspended until someone answers — through reloads, other devices and
        server restarts. Only `prompt`, `options`, `payload` and the JSON Schema of
        `schema` are sent to the user; they must not hold anything private. The prompt
        and the options go without control and bidi characters (`without_controls`), so
        they read as they say. With `options`, the decision is one of them, as given;
        with `schema` (a pydantic model), it is an instance of it; with neither, any JSON
        value.
        """
        self._check_running("run.interrupt()")
        if isinstance(prompt, str):  # the request refuses any other type
            check_text(prompt, "an interrupt's prompt")
            prompt = without_controls(prompt)  # read right above the answers: as it says
        for index, option in enumerate(options or ()):
            if isinstance(option, str):
                check_text(option, f"an interrupt's options[{index}]")
        shown = options
        if isinstance(options, list):  # anything else the request refuses
            shown = [without_controls(o) if isinstance(o, str) else o for o in options]
        entry = self._journal.replay("interrupt", prompt)
        if entry is None:
            check_json(payload, "the interrupt payload", rule=PAYLOAD_RULE)
            decision_schema = schema.model_json_schema() if schema else None
            check_json(decision_schema, "an interrupt's schema", rule=SCHEMA_RULE)
            request = wire.InterruptRequest(
                interrupt_id=new_interrupt_id(),
                prompt=prompt,
                options=shown,
                payload=payload,
                decision_schema=decision_schema,
            )
            self._log.interrupt(request)
            raise Suspend(request)
        decision = entry["decision"]
        if not self.replaying:  # the answer ends the replay: what follows is new
            self._state.end_replay()
        if options is not None and shown is not None and decision in shown:
            return options[shown.index(decision)]  # the option as the agent gave it
        return schema.model_validate(decision) if schema else decision

    async def tool(
        self,
        name: str,
        function: Callable[..., Awaitable[T]],
        /,
        *,
        approval: Approval | None = None,
        **arguments: Any,
    ) -> T:
        """Call `function(**arguments)` as the tool `name`.

        The user sees the tool's name and whether it succeeded; its arguments and output
        (JSON, both) are recorded in the history only. With `approval`, a person is asked
        first; a rejection raises `Rejected` and the tool does not run. A tool that raises
        raises `ToolFailed` from the original exception, after the failure is shown. A
        `function` whose result cannot be awaited (a plain def) raises `TypeError`: it ran.
        """
        return await self.call_tool(name, function, arguments, approval=approval)

    async def call_tool(
        self,
        name: str,
        function: Callable[..., Awaitable[T]],
        arguments: dict[str, Any],
        *,
        approval: Approval | None = None,
        call_id: str | None = None,
    ) -> T:
        """`tool`, for adapters: the arguments as a dict (any names, `approval` too), and
        the model's own `call_id` kept with the call in the history."""
        self._check_running("run.tool()")
        if not isinstance(name, str):
            raise TypeError(f"a tool's name is a str, not {type(name).__name__}")
        check_text(name, "a tool's name")
        check_callable(function, f"tool {name!r}", "await fn(**arguments)")
        if not isinstance(arguments, dict):
            raise TypeError(
                f"the arguments of tool {name!r} are a dict of names to JSON values, "
                f"not {a_value_of(arguments)}"
            )
        check_json(arguments, f"the arguments of tool {name!r}", rule=ARGUMENTS_RULE)
        called = {"role": "tool", "name": name, "arguments": arguments}
        if call_id is not None:
            called["callId"] = call_id
        if approval is not None:
            try:
                decision = await self.interrupt(
                    approval.prompt, options=APPROVAL_OPTIONS, payload=approval.payload
                )
            except Suspend:
                # What the history says of the call if the run is stopped while it waits
                # (the checkpoint keeps it for that); an answer replays the run instead.
                self.history.append({**called, "ok": False, "error": UNANSWERED})
                raise
            if decision != "approve":
                self.history.append({**called, "ok": False, "error": REJECTED})
                raise Rejected(name)
        entry = self._journal.replay("tool", name)
        if entry is not None:  # done before the run was suspended: not again
            self.history.append({**called, **entry["result"]})
            if not entry["result"]["ok"]:
                raise ToolFailed(name, entry["result"]["error"])
            output: T = entry["result"]["output"]
            return output
        frame_id = self._log.new_call_id()
        self._tool_calls.append(name)
        activity: dict[str, Any] = {"callId": frame_id, "name": name, "ok": None}
        self._activity.append(activity)
        self._log.tool_call(frame_id, name)
        try:
            output = await awaited(function(**arguments), f"tool {name!r}")
            check_json(output, f"the output of tool {name!r}", rule=OUTPUT_RULE)
        except NotAsync:
            # It ran: the history says so, and the run fails rather than tell a model
            # the call failed (it would call it again).
            self._check_running(f"the result of tool {name!r}")
            activity["ok"] = False
            self._log.tool_result(frame_id, name, ok=False)
            self.history.append({**called, "ok": False, "error": NOT_AWAITED})
            raise
        except Exception as exc:
            # A call that outlived its run (the run did not wait for it): not recorded.
            self._check_running(f"the result of tool {name!r}")
            activity["ok"] = False
            self._log.tool_result(frame_id, name, ok=False)
            self._record(called, {"ok": False, "error": str(exc)})
            raise ToolFailed(name, str(exc)) from exc
        except asyncio.CancelledError:
            # It started, so it may have acted: the history says so (a model reads it),
            # and the call is not shown as still running.
            if self._ended is None:
                activity["ok"] = False
                self._log.tool_result(frame_id, name, ok=False)
                self.history.append({**called, "ok": False, "error": CUT_SHORT})
            raise
        self._check_running(f"the result of tool {name!r}")
        activity["ok"] = True
        self._log.tool_result(frame_id, name, ok=True)
        self._record(called, {"ok": True, "output": output})
        return output

    def _record(self, called: dict[str, Any], result: dict[str, Any]) -> None:
        self.history.append({**called, **result})
        self._journal.record({"kind": "tool", "name": called["name"], "result": result})

    async def step(self, name: str, function: Callable[[], Awaitable[T]], /) -> T:
        """Do `function()` once as a recorded step of this run, and return its result
        (JSON): a model call, a search, anything that must not happen twice.

        When a suspended run resumes (after a decision, also after a restart), its code
        runs again from the top; a recorded step returns what it returned the first time
        instead of running again, and what it said (`say`) counts as said. So a model is
        never called twice for one answer, and a replay stays deterministic.
        """
        self._check_running("run.step()")
        if not isinstance(name, str):
            raise TypeError(f"a step's name is a str, not {type(name).__name__}")
        check_text(name, "a step's name")
        check_callable(function, f"step {name!r}", "await fn()")
        entry = self._journal.replay("step", name)
        if entry is not None:
            if entry["said"]:
                self.replayed_text.append(entry["said"])
            recorded: T = entry["result"]
            return recorded
        before = len(self._text)
        result = await awaited(function(), f"step {name!r}")
        self._check_running(f"the result of step {name!r}")
        check_json(result, f"the result of step {name!r}", rule=RESULT_RULE)
        said = "".join(self._text[before:])
        self._journal.record({"kind": "step", "name": name, "result": result, "said": said})
        return result

    def record_usage(
        self, model: str, input_tokens: int, output_tokens: int, *, public: bool | None = None
    ) -> None:
        """Count a model call's tokens towards this run's usage: kept on the server (the
        operator API reads it). With `public` (by default the agent's `public_usage`),
        the model's name and the reply's tokens are shown with the reply in the
        transcript too; otherwise no client sees them.

        The name is the model server's to give (an adapter records the one it answers
        with), and becomes a key of the usage and a metrics label: it is kept as a title
        is (`shortened`), one plain line of at most MODEL_NAME_LENGTH characters.

        A resumed run replaying what it did before it asked counts nothing again: those
        calls were counted when they were made."""
        self._check_running("run.record_usage()")
        if not isinstance(model, str):
            raise TypeError(
                f"run.record_usage() takes the model's name as a str, not {type(model).__name__}"
            )
        check_text(model, "the model's name given to run.record_usage()")
        for tokens in (input_tokens, output_tokens):
            if not isinstance(tokens, int) or isinstance(tokens, bool):
                raise TypeError(
                    f"run.record_usage() counts tokens as an int, not {type(tokens).__name__}"
                )
            if tokens < 0:
                raise ValueError(f"run.record_usage() counts tokens from 0, not {tokens}")
        if self.replaying:
            return
        model = shortened(model, MODEL_NAME_LENGTH)
        usage = self.usage.setdefault(model, {"calls": 0, "inputTokens": 0, "outputTokens": 0})
        usage["calls"] += 1
        usage["inputTokens"] += input_tokens
        usage["outputTokens"] += output_tokens
        if self.usage_public if public is None else public:
            shown = self.public_usage
            shown["model"] = model
            shown["inputTokens"] = shown.get("inputTokens", 0) + input_tokens
            shown["outputTokens"] = shown.get("outputTokens", 0) + output_tokens

    def set_title(self, title: str) -> None:
        """Name the conversation (public: the user's list shows it, a `title` frame
        announces it). A title the user gave is kept; this one is then not used."""
        self._check_running("run.set_title()")
        if not isinstance(title, str):
            raise not_text("set_title", title)
        check_text(title, "a title")
        if not visible(title):  # as a user's title: refused when a reader sees nothing
            raise ValueError(f"a title must hold something a reader sees, not {title!r}")
        self.title = shortened(title, TITLE_LENGTH)
        if not self.replaying and self._log.context.record.may_name("agent"):
            self._log.title(self.title)

    def storable_text(self) -> bool:
        """Whether a store can write what the run said, showed and counted. If not (text
        UTF-8 cannot carry, which the calls refuse: one they missed), that text is
        replaced (U+FFFD) as its frames had it, so that the save cannot fail for it."""
        kept = [self._text, self._thinking, self._activity, self._tool_calls]
        kept += [self.replayed_text, self.title, self.usage, self.public_usage]
        if encodable(kept):
            return True
        for pieces in (self._text, self._thinking, self._activity, self._tool_calls):
            pieces[:] = replace_unencodable(pieces)  # in place: a handoff's run shares them
        self.replayed_text[:] = replace_unencodable(self.replayed_text)
        self.title = replace_unencodable(self.title)
        self.usage = replace_unencodable(self.usage)
        self.public_usage = replace_unencodable(self.public_usage)
        return False


def check_count_or_none(setting: str, value: object, unit: str, none_means: str) -> None:
    """Refuse a setting that is neither None nor a whole number of `unit` from 1."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{setting} must be an int, a number of {unit}, or None for {none_means}, not {value!r}"
        )
    if value < 1:
        raise ValueError(
            f"{setting} must be at least 1 ({unit}), or None for {none_means}, not {value!r}"
        )


class NotAsync(TypeError):
    """A tool or a step that is a plain function: known only once called, so it ran."""


def check_callable(function: object, what: str, called_as: str) -> None:
    if not callable(function):
        raise TypeError(
            f"{what} is called as {called_as}: fn must be an async function, "
            f"not {a_value_of(function)}"
        )


async def awaited(returned: Awaitable[T], what: str) -> T:
    """What an async function returned. A plain function's result cannot be awaited:
    refused, saying that it ran (calling it was the only way to tell it was not async,
    as a lambda or a partial returning a coroutine is)."""
    if not inspect.isawaitable(returned):
        raise NotAsync(
            f"{what} must be an async function (async def), or return an awaitable, but "
            f"it returned {a_value_of(returned)}: it ran as a plain function, once, and its "
            "result was not kept"
        )
    return await returned


def check_text(text: str, what: str) -> None:
    """Refuse, where the agent hands it over, text UTF-8 cannot carry (a lone surrogate):
    kept, it would fail the run's save, and everything the run did with it."""
    if not is_unicode(text):
        raise ValueError(
            f"{what} is not valid Unicode (a lone surrogate), which UTF-8, and so no store "
            "or client, can carry"
        )


def not_text(method: str, delta: object) -> TypeError:
    """A delta that is not text: refused where the agent passed it, before it reaches
    the reply (which is text, stored and sent as such)."""
    return TypeError(f"run.{method}() takes a str, not {type(delta).__name__}")


class RunHistory(History):
    """`run.history`: the conversation's history, as a run sees it — writable only until
    its run ends (then `RunEnded`). Reading it costs what reading the history does."""

    def __init__(self, history: History, run: Run) -> None:
        super().__init__(history.preamble, history.exchanges)
        self._run = run

    def _writable(self, exchange: Exchange | None) -> Exchange:
        self._run._check_running("a write to run.history")
        return super()._writable(exchange)


class RunState(MutableMapping[str, JSONValue]):
    """`run.state`: the conversation's AgentState (see `thinwire.state`), as a run sees
    it — writable only until its run ends (then `RunEnded`). The AgentState outlives the
    run: a write made after it would be saved by the next one, under no run."""

    def __init__(self, state: AgentState, run: Run) -> None:
        self._state = state
        self._run = run

    @property
    def writable_keys(self) -> frozenset[str] | None:
        return self._state.writable_keys

    def denied(self, keys: Iterable[str]) -> set[str]:
        """The keys among `keys` that may not be written."""
        return self._state.denied(keys)

    def update_all(self, changes: Mapping[str, JSONValue], *, source: str | None = None) -> None:
        """Write several keys at once: all of them, or — on any refusal — none."""
        self._run._check_running("a write to run.state")
        if source is not None:
            check_source(source)
        self._state.update_all(changes, source=source)

    def set(self, key: str, value: JSONValue, *, source: str | None = None) -> None:
        self.update_all({key: value}, source=source)

    def __getitem__(self, key: str) -> JSONValue:
        return self._state[key]

    def __setitem__(self, key: str, value: JSONValue) -> None:
        self.update_all({key: value})

    def __delitem__(self, key: str) -> None:
        """Deleting a key is audited as writing null to it."""
        self._run._check_running("a write to run.state")
        del self._state[key]

    def __contains__(self, key: object) -> bool:
        return key in self._state

    def __iter__(self) -> Iterator[str]:
        return iter(self._state)

    def __len__(self) -> int:
        return len(self._state)

    def __repr__(self) -> str:
        return repr(self._state)

    def to_json(self) -> dict[str, JSONValue]:
        """A copy of every value."""
        return self._state.to_json()
