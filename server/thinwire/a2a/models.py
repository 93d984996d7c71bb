"""The A2A 1.0 objects thinwire reads and writes, in their JSON form (ProtoJSON: camelCase
fields, enums by name, timestamps as ISO 8601 in UTC).

What thinwire sends is built field by field from public values through the outbound
models, as the wire frames are; nothing internal has a field here. What it reads is
tolerant, as the protocol asks: unknown fields are ignored, and both a field's camelCase
and its proto name are accepted.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)
from pydantic.alias_generators import to_camel

__all__ = [
    "TERMINAL",
    "AgentCapabilities",
    "AgentCard",
    "AgentInterface",
    "AgentSkill",
    "AnyTaskState",
    "Artifact",
    "IncomingMessage",
    "IncomingPart",
    "ListTasksRequest",
    "Message",
    "Part",
    "SecurityRequirement",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskRequest",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
]

#: The states a thinwire task takes.
TaskState = Literal[
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
]
#: Every state the protocol names, for a filter (one thinwire never takes matches none).
AnyTaskState = Literal[
    TaskState,
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
]
#: A task in one of these states takes no more messages and streams nothing more.
TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"})


class Outbound(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    def json_body(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True)


class Inbound(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


# --- tasks, messages, artifacts (sent) -------------------------------------------------


class Part(Outbound):
    text: str | None = None
    data: Any = None
    media_type: str | None = None
    metadata: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _null_data(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A data part whose value is JSON null (a person's answer may be) keeps it."""
        body: dict[str, Any] = handler(self)
        if "data" in self.model_fields_set and self.data is None:
            body["data"] = None
        return body


class Message(Outbound):
    message_id: str
    context_id: str
    task_id: str
    role: Literal["ROLE_AGENT", "ROLE_USER"] = "ROLE_AGENT"
    parts: list[Part]
    metadata: dict[str, Any] | None = None


class Artifact(Outbound):
    artifact_id: str
    name: str
    parts: list[Part]


class TaskStatus(Outbound):
    state: TaskState
    message: Message | None = None
    timestamp: str


class Task(Outbound):
    id: str
    context_id: str
    status: TaskStatus
    artifacts: list[Artifact] | None = None
    history: list[Message] | None = None


class TaskStatusUpdateEvent(Outbound):
    task_id: str
    context_id: str
    status: TaskStatus
    metadata: dict[str, Any] | None = None


class TaskArtifactUpdateEvent(Outbound):
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool
    last_chunk: bool


# --- the agent card (sent) -------------------------------------------------------------


class AgentInterface(Outbound):
    url: str
    protocol_binding: Literal["JSONRPC"] = "JSONRPC"
    protocol_version: str = "1.0"


class AgentCapabilities(Outbound):
    streaming: bool = True
    push_notifications: bool = False
    extended_agent_card: bool = False


class AgentSkill(Outbound):
    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] | None = None


class SecurityRequirement(Outbound):
    schemes: dict[str, dict[str, list[str]]]


class AgentCard(Outbound):
    name: str
    description: str
    supported_interfaces: list[AgentInterface]
    version: str
    capabilities: AgentCapabilities
    security_schemes: dict[str, dict[str, dict[str, str]]] | None = None
    security_requirements: list[SecurityRequirement] | None = None
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]


# --- requests (read) -------------------------------------------------------------------


def absent_if_empty(value: Any) -> Any:
    """ProtoJSON writes an unset string as "": the same as leaving it out."""
    return None if value == "" else value


def absent_if_unset(value: Any) -> Any:
    """An enum nobody set, as ProtoJSON writers put it: its `…_UNSPECIFIED` zero value, or
    "UNRECOGNIZED" (`@a2a-js/sdk` writes that for one its caller left out, as protobuf-ts
    style code names a value it does not know): the same as leaving it out."""
    unset = value == "UNRECOGNIZED" or (isinstance(value, str) and value.endswith("_UNSPECIFIED"))
    return None if unset else value


class IncomingPart(Inbound):
    text: str | None = None
    data: Any = None
    url: str | None = None
    raw: str | None = None


class IncomingMessage(Inbound):
    message_id: str = Field(min_length=1, max_length=256)
    context_id: str | None = None
    task_id: str | None = None
    role: Literal["ROLE_USER", 1]  # ProtoJSON allows an enum by name or by number
    parts: list[IncomingPart] = Field(min_length=1, max_length=64)

    _empty = field_validator("context_id", "task_id", mode="before")(absent_if_empty)


#: `historyLength`: at most this many of the newest messages of a task's history (0: none);
#: absent, all of them.
HistoryLength = Annotated[int | None, Field(ge=0)]


class SendMessageConfiguration(Inbound):
    return_immediately: bool = False
    history_length: HistoryLength = None


class SendMessageRequest(Inbound):
    message: IncomingMessage
    configuration: SendMessageConfiguration = SendMessageConfiguration()


class TaskRequest(Inbound):
    """`GetTask`, `CancelTask` and `SubscribeToTask`: which task (and, for `GetTask`, how
    much of its history)."""

    id: str = Field(min_length=1, max_length=256)
    history_length: HistoryLength = None


class ListTasksRequest(Inbound):
    context_id: str | None = None
    status: AnyTaskState | None = None
    page_size: int = Field(default=50, ge=1, le=100)
    page_token: str | None = None
    history_length: HistoryLength = None
    status_timestamp_after: AwareDatetime | None = None
    include_artifacts: bool = False

    _empty = field_validator("context_id", "page_token", mode="before")(absent_if_empty)
    _unset = field_validator("status", mode="before")(absent_if_unset)
