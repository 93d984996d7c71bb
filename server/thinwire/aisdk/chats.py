"""Chat ids: which of the caller's conversations a `useChat` chat id names.

A chat id of thinwire's form (`ctx-…`) is that context: the caller's, or
`context_not_found`, as everywhere. Any other chat id (the SDK's own random ones) names
the context whose id is derived from it, the agent and the caller:

    ctx- + sha256("thinwire.ai-sdk", agent, principal, chat id)[:36 hex]

Nothing maps one to the other in storage, so nothing can be lost, go stale or disagree
between replicas, and a restart changes nothing. The first message of the chat creates
that context, owned by the caller; another principal sending the same chat id derives a
context of their own, so a guessed chat id reaches nothing of anyone else's. Until the
first message, the chat has no conversation: nothing to resume, no messages.

The derivation has no secret in it on purpose: a context id is not a credential (the
owner check is), and the id must not change when a secret is rotated.
"""

from __future__ import annotations

import hashlib
import re

from thinwire.contexts import Context, not_found
from thinwire.errors import BadRequest, NotFound
from thinwire.ids import CONTEXT_ID
from thinwire.runlog import FrameSource
from thinwire.server import AgentServer

__all__ = ["CHAT_ID", "context_id_of", "find_chat", "not_started", "owned_chat", "send_to_chat"]

#: What a chat id may be, besides a context id: the SDK's ids, UUIDs, nanoids.
CHAT_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")


def context_id_of(agent_name: str, principal: str, chat_id: str) -> str:
    if CONTEXT_ID.fullmatch(chat_id):
        return chat_id
    if not CHAT_ID.fullmatch(chat_id):
        raise BadRequest("invalid_request", "a chat id is 1-100 of A-Z a-z 0-9 _ -, or a ctx- id")
    # Chat ids and agent names hold no NUL: the fields cannot run into each other.
    key = "\0".join(("thinwire.ai-sdk", agent_name, principal, chat_id))
    return "ctx-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:36]


def not_started(error: NotFound, context_id: str, chat_id: str) -> bool:
    """Whether `error` only says that a chat of the SDK's own ids has no conversation yet
    (a ctx- id is never made up here: missing, it is nobody's, or someone else's)."""
    return error.code == "context_not_found" and context_id != chat_id


async def find_chat(
    server: AgentServer, agent_name: str, principal: str, chat_id: str
) -> Context | None:
    """The caller's conversation of the chat; None if the chat has not started one."""
    context_id = context_id_of(agent_name, principal, chat_id)
    try:
        return await server.context(agent_name, context_id, principal)
    except NotFound as exc:
        if not_started(exc, context_id, chat_id):
            return None
        raise


async def owned_chat(server: AgentServer, agent_name: str, principal: str, chat_id: str) -> Context:
    """The caller's conversation of the chat, or `context_not_found`."""
    context = await find_chat(server, agent_name, principal, chat_id)
    if context is None:
        raise not_found(context_id_of(agent_name, principal, chat_id))
    return context


async def send_to_chat(
    server: AgentServer,
    agent_name: str,
    principal: str,
    chat_id: str,
    text: str,
    message_id: str | None,
) -> FrameSource:
    """The user's message in the chat's conversation, started by it if need be."""
    context = await find_chat(server, agent_name, principal, chat_id)
    if context is not None:
        return await server.send(agent_name, principal, context.id, text, message_id=message_id)
    # Two first messages at once: one starts, the other is refused (the store creates an
    # id once).
    derived = context_id_of(agent_name, principal, chat_id)
    return await server.send(
        agent_name, principal, None, text, message_id=message_id, new_context_id=derived
    )
