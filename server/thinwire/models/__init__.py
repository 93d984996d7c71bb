"""Model-backed agents: a chat model with tools in a few lines (`ChatAgent`,
`OpenAIChat`, `tool`), and adapters for agents built with a framework.

None of it needs an extra to import; a model or an adapter needs its extra when it is
used (`pip install "thinwire[openai]"`, `"thinwire[pydantic-ai]"`, `"thinwire[langgraph]"`,
`"thinwire[strands]"`).
"""

from __future__ import annotations

from thinwire.errors import ModelError
from thinwire.models.base import ChatModel, Emitter, ModelTurn, ToolCall
from thinwire.models.chat import ChatAgent
from thinwire.models.messages import model_turn, to_chat_messages
from thinwire.models.openai import OpenAIChat
from thinwire.models.tools import ToolSpec, ToolWarning, tool

__all__ = [
    "ChatAgent",
    "ChatModel",
    "Emitter",
    "ModelError",
    "ModelTurn",
    "OpenAIChat",
    "ToolCall",
    "ToolSpec",
    "ToolWarning",
    "model_turn",
    "to_chat_messages",
    "tool",
]
