"""thinwire: put AI agents in front of React UIs. The server owns the memory."""

from __future__ import annotations

from thinwire.agent import Agent, Run
from thinwire.app import create_app
from thinwire.errors import StateValueError, ThinwireError, WriteDenied
from thinwire.identity import anonymous
from thinwire.interrupts import Approval, Rejected, ReplayMismatch, Suspend, ToolFailed
from thinwire.mounting import mount
from thinwire.server import AgentServer
from thinwire.state import AgentState
from thinwire.stores import MemoryStore, SQLiteStore, Store

__all__ = [
    "Agent",
    "AgentServer",
    "AgentState",
    "Approval",
    "MemoryStore",
    "Rejected",
    "ReplayMismatch",
    "Run",
    "SQLiteStore",
    "StateValueError",
    "Store",
    "Suspend",
    "ThinwireError",
    "ToolFailed",
    "WriteDenied",
    "anonymous",
    "create_app",
    "mount",
]
