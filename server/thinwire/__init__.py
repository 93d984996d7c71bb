"""thinwire: put AI agents in front of React UIs. The server owns the memory."""

from __future__ import annotations

from thinwire.agent import Agent, Run
from thinwire.app import AgentServer, create_app
from thinwire.errors import ThinwireError
from thinwire.state import AgentState, StateValueError

__all__ = [
    "Agent",
    "AgentServer",
    "AgentState",
    "Run",
    "StateValueError",
    "ThinwireError",
    "create_app",
]
