"""Contexts: one conversation each, with everything the server remembers about it.

Held in memory for now; a store interface replaces this registry's dict when memory
must survive restarts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thinwire import wire
from thinwire.agent import Agent
from thinwire.errors import NotFound
from thinwire.ids import new_context_id
from thinwire.state import AgentState

if TYPE_CHECKING:
    from thinwire.runs import RunLog

__all__ = ["Context", "ContextRegistry", "new_context"]


@dataclass(eq=False)
class Context:
    id: str
    agent_name: str
    agent: Agent
    history: list[dict[str, Any]]
    state: AgentState
    #: The public projection of the history: the only part a client may read.
    transcript: list[wire.TranscriptTurn] = field(default_factory=list)
    last_seq: int = 0
    #: The run in progress, if any: at most one per context.
    run: RunLog | None = None


def new_context(context_id: str, agent_name: str, agent: Agent) -> Context:
    """A fresh conversation: the system prompt in its history, the initial state copied."""
    history: list[dict[str, Any]] = []
    if agent.system_prompt:
        history.append({"role": "system", "content": agent.system_prompt})
    return Context(
        id=context_id,
        agent_name=agent_name,
        agent=agent,
        history=history,
        state=AgentState(agent.initial_state),
    )


class ContextRegistry:
    def __init__(self) -> None:
        self._contexts: dict[str, Context] = {}

    def create(self, agent_name: str, agent: Agent) -> Context:
        context = new_context(new_context_id(), agent_name, agent)
        self._contexts[context.id] = context
        return context

    def get(self, agent_name: str, context_id: str) -> Context:
        """The context, or `context_not_found` — also when it belongs to another agent."""
        context = self._contexts.get(context_id)
        if context is None or context.agent_name != agent_name:
            raise NotFound("context_not_found", f"no context {context_id} for this agent")
        return context

    def __len__(self) -> int:
        return len(self._contexts)
