"""Conversation ids a client mints itself — the AI SDK's chat ids, AG-UI's thread ids —
and the caller's thinwire conversations they name.

An id of thinwire's form (`ctx-…`) is that context: the caller's, or
`context_not_found`, as everywhere (a malformed one is `invalid_context_id`, never a new
conversation). Any other id names the context whose id is derived from it, the protocol,
the agent and the caller:

    ctx- + sha256(namespace, agent, principal, id)[:36 hex]

Nothing maps one to the other in storage: nothing to lose, expire or disagree about
between replicas, and a restart changes nothing. The first message creates that
context, owned by the caller; another principal sending the same id derives a context of
their own, so a guessed id reaches nothing of anyone else's. Each protocol has its own
namespace: a UUID a page happens to use with two faces names two conversations.

The derivation has no secret in it on purpose: a context id is not a credential (the
owner check is), and the id must not change when a secret is rotated.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from thinwire.contexts import Context, not_found
from thinwire.errors import BadRequest, NotFound
from thinwire.ids import validate_context_id
from thinwire.runlog import FrameSource
from thinwire.server import AgentServer
from thinwire.wire import MessageId

__all__ = ["FOREIGN_ID", "ForeignIds", "message_id_of"]

MESSAGE_ID: TypeAdapter[str] = TypeAdapter(MessageId)


def message_id_of(value: str) -> str | None:
    """A client's id of its message, when thinwire can take it as one (to know a retried
    request); None when it is not a valid `messageId`."""
    try:
        return MESSAGE_ID.validate_python(value)
    except ValidationError:
        return None


#: What a client's own id may be: UUIDs, nanoids and the like.
FOREIGN_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")


class ForeignIds:
    """The conversations of one protocol's client-minted ids (`field` names them in
    errors: "chat id", "threadId")."""

    def __init__(self, namespace: str, field: str) -> None:
        self.namespace = namespace
        self.field = field

    def context_id(self, agent_name: str, principal: str, foreign_id: str) -> str:
        if foreign_id.startswith("ctx-"):  # one of thinwire's, or a mistake: never a new one
            return validate_context_id(foreign_id)
        if not FOREIGN_ID.fullmatch(foreign_id):
            raise BadRequest(
                "invalid_request", f"{self.field}: 1-100 of A-Z a-z 0-9 _ -, or a ctx- id"
            )
        # The ids and agent names hold no NUL: the fields cannot run into each other.
        key = "\0".join((self.namespace, agent_name, principal, foreign_id))
        return "ctx-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:36]

    @staticmethod
    def not_started(error: NotFound, context_id: str, foreign_id: str) -> bool:
        """Whether `error` only says that a client's own id has no conversation yet (a
        ctx- id is never made up here: missing, it is nobody's, or someone else's)."""
        return error.code == "context_not_found" and context_id != foreign_id

    async def find(
        self, server: AgentServer, agent_name: str, principal: str, foreign_id: str
    ) -> Context | None:
        """The caller's conversation of the id; None if it has not started one."""
        context_id = self.context_id(agent_name, principal, foreign_id)
        try:
            return await server.context(agent_name, context_id, principal)
        except NotFound as exc:
            if self.not_started(exc, context_id, foreign_id):
                return None
            raise

    async def owned(
        self, server: AgentServer, agent_name: str, principal: str, foreign_id: str
    ) -> Context:
        """The caller's conversation of the id, or `context_not_found`."""
        context = await self.find(server, agent_name, principal, foreign_id)
        if context is None:
            raise not_found(self.context_id(agent_name, principal, foreign_id))
        return context

    async def transcript(
        self, server: AgentServer, agent_name: str, principal: str, foreign_id: str
    ) -> dict[str, Any] | None:
        """The public transcript of the id's conversation; None if it has not started."""
        context_id = self.context_id(agent_name, principal, foreign_id)
        try:
            body = await server.read_transcript(agent_name, context_id, principal)
        except NotFound as exc:
            if self.not_started(exc, context_id, foreign_id):
                return None
            raise
        transcript: dict[str, Any] = json.loads(body)
        return transcript

    async def send(
        self,
        server: AgentServer,
        agent_name: str,
        principal: str,
        foreign_id: str,
        text: str,
        *,
        message_id: str | None,
        data: dict[str, Any] | None = None,
    ) -> FrameSource:
        """The user's message in the id's conversation, started by it if need be. Two
        first messages at once: one starts, the other is refused (an id is created once)."""
        context = await self.find(server, agent_name, principal, foreign_id)
        context_id = context.id if context is not None else None
        return await server.send(
            agent_name,
            principal,
            context_id,
            text,
            data=data,
            message_id=message_id,
            new_context_id=self.context_id(agent_name, principal, foreign_id),
        )
