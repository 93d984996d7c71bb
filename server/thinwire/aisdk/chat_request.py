"""What a `useChat` request asks for, read from its body without trusting its history.

The body is the SDK's (`id`, `messages`, `trigger`, `messageId`), or the documented
"send only the last message" shape (`id`, `message`). Either way only the last message
is read; the messages before it are the client's copy of the conversation, which the
server neither needs nor believes.

    trigger             last message   asks
    submit-message      user           Say: its text parts, joined, and its id; with the
                                       body's `messageId` (the SDK's edit) refused
    submit-message      assistant      Answer: its `tool-interrupt` part with an output
                                       (`addToolOutput`) is the decision
    regenerate-message  any            Regenerate: answer the last message again; the
                                       body's `messageId` names the reply it replaces

Whether a message or a regenerate agrees with the conversation is `rewrites`' business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.requests import Request

from thinwire.aisdk.chunks import INTERRUPT_TOOL
from thinwire.errors import BadRequest
from thinwire.foreign_ids import message_id_of
from thinwire.parsing import check_message, read_json, validated

__all__ = ["Answer", "ChatRequest", "Regenerate", "Say", "edit_refused", "read_chat_request"]


class ChatRequest(BaseModel):
    """The body the SDK posts; fields it may add (the app's `body`, say) are ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    id: str = Field(max_length=100)
    trigger: Literal["submit-message", "regenerate-message"] = "submit-message"
    message_id: str | None = Field(default=None, max_length=100)
    message: Any = None
    messages: list[Any] | None = None


class UIMessage(BaseModel):
    """The last message: its parts are read by `type`, anything else in them ignored."""

    model_config = ConfigDict(extra="ignore")

    id: str = Field(default="", max_length=100)
    role: Literal["user", "assistant"]
    parts: list[dict[str, Any]]


@dataclass(frozen=True)
class Say:
    text: str
    #: The SDK's id of the message, when thinwire can take it as one (retries).
    message_id: str | None


@dataclass(frozen=True)
class Answer:
    interrupt_id: str
    value: Any


@dataclass(frozen=True)
class Regenerate:
    #: The message `regenerate({ messageId })` named; None for the last one.
    message_id: str | None


def edit_refused() -> BadRequest:
    return BadRequest(
        "invalid_request",
        "editing a sent message is not supported here: thinwire's own routes edit by turn id",
    )


async def read_chat_request(
    request: Request, *, max_body_bytes: int, max_message_bytes: int
) -> tuple[str, Say | Answer | Regenerate]:
    """The chat id and what the request asks; `invalid_request` for anything else."""
    body = validated(ChatRequest, await read_json(request, max_body_bytes))
    if body.trigger == "regenerate-message":
        return body.id, Regenerate(body.message_id)
    if body.message is not None:
        last, at = body.message, "message"
    elif body.messages:
        last, at = body.messages[-1], f"messages[{len(body.messages) - 1}]"
    else:
        raise BadRequest("invalid_request", "message: the message to send is missing")
    message = validated(UIMessage, last, at)
    if message.role == "assistant":
        return body.id, answer_in(message)
    if body.message_id is not None:
        raise edit_refused()
    texts: list[str] = []
    for part in message.parts:
        if part.get("type") == "text":
            if not isinstance(part.get("text"), str):
                raise BadRequest("invalid_request", "message.parts: a text part's text is a string")
            texts.append(part["text"])
    text = "".join(texts)
    if not text:
        raise BadRequest("invalid_request", "message.parts: no text to send")
    check_message(text, max_message_bytes)
    return body.id, Say(text, message_id_of(message.id))


def answer_in(message: UIMessage) -> Answer:
    """The interrupt the assistant's message answers: its latest `interrupt` tool part
    that has an output. Whether that interrupt is pending, and whether the output is an
    answer it takes, is the decision's business (`AgentServer.decide`)."""
    for part in reversed(message.parts):
        call_id = part.get("toolCallId")
        if (
            part.get("type") == f"tool-{INTERRUPT_TOOL}"
            and part.get("state") == "output-available"
            and isinstance(call_id, str)
        ):
            return Answer(call_id, part.get("output"))
    raise BadRequest(
        "invalid_request",
        f"an assistant message is sent only to answer its `{INTERRUPT_TOOL}` tool (addToolOutput)",
    )
