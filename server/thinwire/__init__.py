"""thinwire: put AI agents in front of React UIs. The server owns the memory."""

from __future__ import annotations

from thinwire.agent import Agent, Run
from thinwire.app import create_app
from thinwire.errors import ThinwireError
from thinwire.identity import anonymous
from thinwire.interrupts import Approval, Rejected, ToolFailed
from thinwire.server import AgentServer
from thinwire.state import AgentState, StateValueError, WriteDenied
from thinwire.stores import MemoryStore, SQLiteStore, Store

__all__ = [
    "Agent",
    "AgentServer",
    "AgentState",
    "Approval",
    "MemoryStore",
    "Rejected",
    "Run",
    "SQLiteStore",
    "StateValueError",
    "Store",
    "ThinwireError",
    "ToolFailed",
    "WriteDenied",
    "anonymous",
    "create_app",
]
