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
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from thinwire.state import AgentState

if TYPE_CHECKING:
    from thinwire.runs import RunLog

__all__ = ["Agent", "Run"]

T = TypeVar("T")


class Agent:
    """Base class for agents. Override `run`; set the class attributes to configure it.

    `initial_state` seeds each new context's AgentState (audited with source "system");
    `writable_keys`, when not None, is the only set of keys anyone may write afterwards.
    """

    system_prompt: ClassVar[str] = ""
    initial_state: ClassVar[Mapping[str, Any]] = {}
    writable_keys: ClassVar[frozenset[str] | None] = None

    async def run(self, run: Run, text: str) -> None:
        raise NotImplementedError


class Handoff(Protocol):
    def __call__(self, agent_name: str, run: Run, text: str) -> Awaitable[None]: ...


class Run:
    """One execution of an agent for one user message."""

    def __init__(
        self,
        *,
        context_id: str,
        run_id: str,
        history: list[dict[str, Any]],
        state: AgentState,
        log: RunLog,
        handoff: Handoff,
        shared_state: dict[str, Any] | None = None,
    ) -> None:
        self.context_id = context_id
        self.run_id = run_id
        #: The agent's internal messages for this context (server-only, persisted).
        self.history = history
        #: Key-value AgentState of this context (server-only, persisted, JSON values).
        self.state = state
        #: Scratch space shared by the tools of this agent's run only; dropped when it ends.
        self.invocation_state: dict[str, Any] = {}
        #: Shared, by reference, by every agent taking part in this run (see `handoff`);
        #: dropped when the run ends.
        self.shared_state: dict[str, Any] = {} if shared_state is None else shared_state
        self._log = log
        self._handoff = handoff
        self._text: list[str] = []
        self._tool_calls: list[str] = []

    def handed_to(self) -> Run:
        """The run another agent continues this one in: same reply, same shared state."""
        other = Run(
            context_id=self.context_id,
            run_id=self.run_id,
            history=self.history,
            state=self.state,
            log=self._log,
            handoff=self._handoff,
            shared_state=self.shared_state,
        )
        other._text = self._text
        other._tool_calls = self._tool_calls
        return other

    @property
    def text(self) -> str:
        """The reply streamed so far."""
        return "".join(self._text)

    @property
    def tool_calls(self) -> list[str]:
        """Names of the tools called so far, in call order."""
        return list(self._tool_calls)

    async def think(self, delta: str) -> None:
        """Stream a piece of public reasoning to the user."""
        if delta:
            self._log.thinking(delta)

    async def say(self, delta: str) -> None:
        """Stream a piece of the reply to the user."""
        if delta:
            self._text.append(delta)
            self._log.token(delta)

    async def handoff(self, agent_name: str, text: str) -> None:
        """Let another agent of this server continue this run.

        It streams into the same reply and shares this run's `shared_state`, the
        conversation's history and AgentState; its `invocation_state` is its own.
        """
        await self._handoff(agent_name, self, text)

    async def tool(
        self, name: str, function: Callable[..., Awaitable[T]], /, **arguments: Any
    ) -> T:
        """Call `function(**arguments)` as the tool `name`.

        The user sees the tool's name and whether it succeeded; its arguments and output
        are recorded in the history only. An exception propagates to the agent after the
        failure is shown.
        """
        call_id = self._log.new_call_id()
        self._tool_calls.append(name)
        self._log.tool_call(call_id, name)
        try:
            output = await function(**arguments)
        except Exception:
            self._log.tool_result(call_id, name, ok=False)
            self.history.append({"role": "tool", "name": name, "arguments": arguments, "ok": False})
            raise
        self._log.tool_result(call_id, name, ok=True)
        self.history.append(
            {"role": "tool", "name": name, "arguments": arguments, "output": output, "ok": True}
        )
        return output
