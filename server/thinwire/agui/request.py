"""What an AG-UI `RunAgentInput` asks for, read without trusting what the client keeps.

`HttpAgent` posts the whole conversation as the client holds it, its state, the tools
and context it offers, and props to forward. The server owns the conversation, its
state and the agent's tools, so of all that it reads:

    resume           one entry, `resolved`: Answer, its payload the decision
                     one entry, `cancelled`: Cancel, the waiting run ends as stopped (if
                     the thread still waits for it)
    else messages    the newest user message: Say, its text (text parts joined)
    forwardedProps   with a Say, a JSON object: the run's `data` (public, like the text)

Everything else — the messages before that one, `state`, `tools`, `context`,
`parentRunId` — is the client's copy or the client's wish, and is neither read nor kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from starlette.requests import Request

from thinwire.errors import BadRequest, quoted
from thinwire.foreign_ids import message_id_of
from thinwire.parsing import check_data, check_message, read_json, validated

__all__ = ["Answer", "Cancel", "RunInput", "Say", "read_run_input", "read_thread_input"]

#: The protocol's major version this face speaks (`protocolVersion` "1.x").
MAJOR_VERSION = "1"


class ResumeEntry(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    interrupt_id: str = Field(max_length=100)
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class RunAgentInput(BaseModel):
    """The fields of the body this face reads; any other is ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    thread_id: str = Field(max_length=100)
    run_id: str = Field(min_length=1, max_length=100)
    protocol_version: str | None = Field(default=None, max_length=16)
    messages: list[Any] = Field(default_factory=list)
    forwarded_props: Any = None
    resume: list[ResumeEntry] | None = None


class UserMessage(BaseModel):
    """The newest user message: its id and content, anything else in it ignored."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""
    content: str | list[dict[str, Any]]


@dataclass(frozen=True)
class Say:
    text: str
    #: The message's id, when thinwire can take it as one (a retried request).
    message_id: str | None
    data: dict[str, Any] | None


@dataclass(frozen=True)
class Answer:
    interrupt_id: str
    value: Any


@dataclass(frozen=True)
class Cancel:
    interrupt_id: str


@dataclass(frozen=True)
class RunInput:
    thread_id: str
    #: The client's id of this run: the events name it, as the protocol expects.
    run_id: str
    asks: Say | Answer | Cancel


async def read_body(request: Request, max_body_bytes: int) -> RunAgentInput:
    body = validated(RunAgentInput, await read_json(request, max_body_bytes))
    version = body.protocol_version
    if version is not None and version.partition(".")[0] != MAJOR_VERSION:
        raise BadRequest(
            "protocol_mismatch",
            f"client speaks AG-UI {quoted(version, 16)}; this server speaks {MAJOR_VERSION}.x",
        )
    return body


async def read_run_input(
    request: Request, *, max_body_bytes: int, max_message_bytes: int, max_data_bytes: int
) -> RunInput:
    """The thread, the run and what the request asks; `invalid_request` for anything
    else."""
    body = await read_body(request, max_body_bytes)
    if body.resume:
        asks: Say | Answer | Cancel = resumed(body.resume)
    else:
        asks = said(body.messages, body.forwarded_props, max_message_bytes, max_data_bytes)
    return RunInput(body.thread_id, body.run_id, asks)


async def read_thread_input(request: Request, *, max_body_bytes: int) -> tuple[str, str]:
    """The thread and the run of a request that asks for nothing but the thread (a
    reconnection): nothing else of the body is read."""
    body = await read_body(request, max_body_bytes)
    return body.thread_id, body.run_id


def resumed(entries: list[ResumeEntry]) -> Answer | Cancel:
    if len(entries) > 1:
        raise BadRequest("invalid_request", "resume: a thread waits for one decision at a time")
    entry = entries[0]
    if entry.status == "cancelled":
        return Cancel(entry.interrupt_id)
    return Answer(entry.interrupt_id, entry.payload)


def said(messages: list[Any], forwarded: Any, max_message_bytes: int, max_data_bytes: int) -> Say:
    users = [i for i, m in enumerate(messages) if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise BadRequest("invalid_request", "messages: no user message to send")
    newest = users[-1]
    message = validated(UserMessage, messages[newest], f"messages[{newest}]")
    content = message.content
    if not isinstance(content, str):
        texts = [part.get("text") for part in content if part.get("type") == "text"]
        content = "".join(text for text in texts if isinstance(text, str))
    check_message(content, max_message_bytes)
    if forwarded is not None and not isinstance(forwarded, dict):
        raise BadRequest("invalid_request", "forwardedProps: a JSON object (the run's data)")
    check_data(forwarded, max_data_bytes)
    return Say(content, message_id_of(message.id), forwarded or None)
