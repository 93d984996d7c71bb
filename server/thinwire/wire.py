"""The wire schema: every frame and request body that crosses between server and client.

This module is the single source of truth for the protocol. `make schema` turns it into
JSON Schema and TypeScript types in `packages/client/src/generated/`.

Frames are allow-listed: each is built field by field from public values by the code that
emits it. Nothing internal (history, AgentState, tool arguments or outputs) has a field
here, so nothing internal can be serialised onto the wire by accident.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = [
    "HEARTBEAT_HEADER",
    "MAX_BRANCHES",
    "MAX_SEQ",
    "MAX_TRANSCRIPT_PAGE",
    "PROTOCOL_HEADER",
    "PROTOCOL_VERSION",
    "REQUEST_ID_PATTERN",
    "WEBSOCKET_SUBPROTOCOL",
    "WEBSOCKET_SUBPROTOCOL_LINES",
    "AttachCommand",
    "Command",
    "CommandBase",
    "CommandType",
    "DecideCommand",
    "DecisionRequest",
    "DoneFrame",
    "ErrorBody",
    "ErrorDetail",
    "ErrorFrame",
    "Frame",
    "Heartbeat",
    "InterruptFrame",
    "InterruptRequest",
    "Message",
    "MessageId",
    "PublicData",
    "RejectedFrame",
    "RequestId",
    "RunRequest",
    "RunStartFrame",
    "SendCommand",
    "StopCommand",
    "StopReason",
    "StopResult",
    "ThinkingFrame",
    "Ticket",
    "TokenFrame",
    "ToolCallFrame",
    "ToolResultFrame",
    "Transcript",
    "TranscriptTurn",
    "TurnAsked",
]

PROTOCOL_VERSION = "1"
PROTOCOL_HEADER = "Thinwire-Protocol"
#: On an SSE stream: the seconds of silence after which the server sends a heartbeat ("0":
#: it sends none). A client takes a stream silent for much longer as broken.
HEARTBEAT_HEADER = "Thinwire-Heartbeat"
#: A browser cannot put headers on a WebSocket: the version travels as its subprotocol.
WEBSOCKET_SUBPROTOCOL = f"thinwire.v{PROTOCOL_VERSION}"
#: The same protocol with several frames to a message, one per line (JSON never holds a
#: raw newline): a burst leaves in one write, as it does over SSE. Preferred when offered.
WEBSOCKET_SUBPROTOCOL_LINES = f"{WEBSOCKET_SUBPROTOCOL}.lines"

StopReason = Literal["end", "stopped", "interrupted", "error"]
#: The greatest frame seq: what a JavaScript number holds exactly.
MAX_SEQ = 2**53 - 1
#: Exchanges one page of a transcript may hold (`GET …/contexts/{id}?limit=`).
MAX_TRANSCRIPT_PAGE = 1000
#: Branches one conversation may make, for its life: a turn id has four hex digits for
#: its branch. So no turn has more alternatives either.
MAX_BRANCHES = 0x10000


class WireModel(BaseModel):
    """camelCase on the wire, snake_case in Python; strict about unknown input fields."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        # Frames always carry their `type`; the schema must say so.
        json_schema_serialization_defaults_required=True,
    )


# --- requests -------------------------------------------------------------------------


class Message(WireModel):
    """A user message."""

    text: str = Field(min_length=1, description="What the user typed; never empty.")


PublicData = Annotated[
    dict[str, Any],
    Field(
        description="Extra input for the agent from the page (the route it is on, an item "
        "the user selected): a JSON object of at most the server's `max_data_bytes`. It "
        "comes from the client, so it is public and untrusted, like the message.",
    ),
]

MessageId = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z0-9_.:-]{8,64}$",
        description="Chosen by the client, new for every message: a send repeated with the "
        "same id (a retry whose first try may have reached the server) starts no second "
        "run, but streams the run the first one started.",
    ),
]


TurnId = Annotated[
    str,
    Field(
        pattern=r"^turn-[0-9a-f]{12}-[ua][0-9]{1,4}$",
        description="A turn's id: stable for the life of the conversation.",
    ),
]

AFTER_TURN_ID = (
    "The last turn the client shows (any turn of that exchange): the message goes on the "
    "branch that ends there, the branch shown or another, which it then becomes (as if "
    "switched to), so a tab left on a branch another tab switched away from continues "
    "what its user sees. `branch_moved` (409, nothing recorded) when the conversation went "
    "on from that exchange, or was cleared, since. Omitted: after the branch shown."
)

REGENERATE_TURN_ID = (
    "The reply to regenerate (or another turn of its exchange), the last the client shows: "
    "of the branch shown, or of another, which it then becomes (as if switched to). "
    "`branch_moved` (409, nothing recorded) when the conversation went on from that "
    "exchange, or was cleared, since. Omitted: the last reply of the branch shown."
)


class RunRequest(WireModel):
    """Body of `POST /agents/{agent}/runs`: start a run, in a new or an existing context."""

    context_id: str | None = Field(
        default=None,
        description="Continue this conversation; omit to start a new one (the server mints "
        "the id).",
    )
    message_id: MessageId | None = None
    message: Message
    data: PublicData | None = None
    after_turn_id: TurnId | None = Field(default=None, description=AFTER_TURN_ID)


#: What a `requestId` is, for the schema and for the server's echo of a refused command.
REQUEST_ID_PATTERN = r"[A-Za-z0-9_.:-]{1,64}"

RequestId = Annotated[
    str,
    Field(
        pattern=f"^{REQUEST_ID_PATTERN}$",
        description="Chosen by the client; echoed in the `run_start` or `rejected` frame "
        "this command causes, so a socket with several commands in flight can tell "
        "their answers apart.",
    ),
]


class CommandBase(WireModel):
    request_id: RequestId | None = None


class SendCommand(CommandBase):
    """WebSocket: start a run, like `POST /agents/{agent}/runs`."""

    type: Literal["send"]
    context_id: str | None = None
    message_id: MessageId | None = None
    message: Message
    data: PublicData | None = None
    after_turn_id: TurnId | None = Field(default=None, description=AFTER_TURN_ID)


class AttachCommand(CommandBase):
    """WebSocket: follow the latest run of a context, like `GET …/events`."""

    type: Literal["attach"]
    context_id: str
    after: int = Field(
        default=0,
        ge=0,
        le=MAX_SEQ,
        strict=True,
        description="Send only frames with a greater seq.",
    )


class DecisionRequest(WireModel):
    """Body of `POST …/decisions`: a person's answer to a pending interrupt."""

    interrupt_id: str
    value: Any = Field(description="One of the offered options, or JSON matching the schema.")


class DecideCommand(CommandBase):
    """WebSocket: answer a pending interrupt, like `POST …/decisions`."""

    type: Literal["decide"]
    context_id: str
    interrupt_id: str
    value: Any = Field(description="One of the offered options, or JSON matching the schema.")


class StopCommand(CommandBase):
    """WebSocket: stop the run in progress, like `POST …/stop`."""

    type: Literal["stop"]
    context_id: str


class EditCommand(CommandBase):
    """WebSocket: like `POST …/edits`."""

    type: Literal["edit"]
    context_id: str
    turn_id: TurnId
    message_id: MessageId | None = None
    message: Message
    data: PublicData | None = None


class RegenerateCommand(CommandBase):
    """WebSocket: like `POST …/regenerate`."""

    type: Literal["regenerate"]
    context_id: str
    message_id: MessageId | None = None
    turn_id: TurnId | None = Field(default=None, description=REGENERATE_TURN_ID)


Command = Annotated[
    SendCommand | AttachCommand | StopCommand | DecideCommand | EditCommand | RegenerateCommand,
    Field(discriminator="type"),
]
CommandType = Literal["send", "attach", "stop", "decide", "edit", "regenerate"]


# --- frames (server -> client) --------------------------------------------------------


class FrameBase(WireModel):
    context_id: str = Field(description="The conversation this frame belongs to.")
    run_id: str = Field(description="The run that emitted this frame.")
    seq: int = Field(ge=1, description="Monotonic per context; the SSE `id:`.")


class RunStartFrame(FrameBase):
    """First frame of every run: announces the context id (minted or given), the run id,
    and the ids of the turns it writes."""

    type: Literal["run_start"] = "run_start"
    agent: str
    request_id: str | None = Field(
        default=None, description="The `requestId` of the command that started the run."
    )
    turn_id: str | None = Field(
        default=None, description="The id the reply this run writes has in the transcript."
    )
    user_turn_id: str | None = Field(
        default=None,
        description="The id of the user's turn the run answers; null when it continues one "
        "(a decision).",
    )
    after_turn_id: str | None = Field(
        default=None,
        description="The turn the run's first new turn follows on its branch: the last turn "
        "of the exchange before (or, continuing a reply, that reply's turn before it); null "
        "for the first message. A client whose view does not end with it has missed turns "
        "(another tab's) and loads the transcript again.",
    )
    branch_switched: bool = Field(
        default=False,
        description="True when the run first made another branch the one shown: the one "
        "its command named (a send's `afterTurnId`, a regenerate's `turnId`, the turn an "
        "edit replaces), left by the client while another tab switched, regenerated or "
        "edited. The exchanges that client shows may then have alternatives it does not "
        "know of: it loads the transcript again once the run is over. False otherwise "
        "(an older server omits it).",
    )


class TitleFrame(FrameBase):
    """The agent named the conversation."""

    type: Literal["title"] = "title"
    title: str


class ThinkingFrame(FrameBase):
    """A delta of the agent's public reasoning."""

    type: Literal["thinking"] = "thinking"
    delta: str


class ToolCallFrame(FrameBase):
    """The agent started a tool. Arguments stay on the server."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str


class ToolResultFrame(FrameBase):
    """A tool finished. Its output stays on the server; only success is public."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    ok: bool


class InterruptRequest(WireModel):
    """What the agent asks a person: only what it chose to make public."""

    interrupt_id: str
    prompt: str
    options: list[str] | None = Field(
        default=None, description="The answers to choose from; null when free-form."
    )
    payload: Any = Field(default=None, description="Public details for the UI to show.")
    decision_schema: dict[str, Any] | None = Field(
        default=None, description="JSON Schema a free-form answer must match."
    )


class InterruptFrame(FrameBase):
    """The run needs a person's decision; a `done` with stop reason `interrupted` follows."""

    type: Literal["interrupt"] = "interrupt"
    interrupt: InterruptRequest


class TokenFrame(FrameBase):
    """A delta of the reply text."""

    type: Literal["token"] = "token"
    delta: str


class DoneFrame(FrameBase):
    """Last frame of a run."""

    type: Literal["done"] = "done"
    text: str = Field(description="The final reply text (the concatenated token deltas).")
    tool_calls: list[str] = Field(description="Tool names in call order.")
    stop_reason: StopReason


class ErrorFrame(FrameBase):
    """The run failed; a `done` with stop reason `error` follows."""

    type: Literal["error"] = "error"
    code: str
    message: str
    retryable: bool


class RejectedFrame(WireModel):
    """WebSocket: a command the server refused — the equivalent of an HTTP 4xx.

    `no_run` answers an attach when there is nothing to follow.
    """

    type: Literal["rejected"] = "rejected"
    code: str
    message: str
    retryable: bool = False
    command: CommandType | None = None
    context_id: str | None = None
    request_id: str | None = Field(
        default=None, description="The `requestId` of the refused command."
    )
    interrupt_id: str | None = Field(
        default=None, description="With `decision_pending`: the interrupt to answer first."
    )


class Heartbeat(WireModel):
    """WebSocket: the socket is alive, sent while a run it follows is quiet (no run's
    frame; a client notes it and reads on)."""

    type: Literal["heartbeat"] = "heartbeat"


Frame = Annotated[
    RunStartFrame
    | TitleFrame
    | ThinkingFrame
    | ToolCallFrame
    | ToolResultFrame
    | TokenFrame
    | InterruptFrame
    | DoneFrame
    | ErrorFrame,
    Field(discriminator="type"),
]


# --- responses ------------------------------------------------------------------------


class Activity(WireModel):
    """A tool the agent called in a turn: its name and whether it succeeded (null: it did
    not finish). Never its arguments or output."""

    call_id: str
    name: str
    ok: bool | None


class TurnUsage(WireModel):
    input_tokens: int
    output_tokens: int


class TurnMeta(WireModel):
    """When a turn started and finished; the model and its tokens only when the agent
    made them public."""

    started_at: float | None = None
    finished_at: float | None = None
    model: str | None = None
    usage: TurnUsage | None = None


AskedStatus = Literal["waiting", "answered", "stopped"]


class TurnAsked(WireModel):
    """The decision a reply asked a person for, and how that ended: the record of what
    the user decided, kept after the question is no longer pending."""

    request: InterruptRequest = Field(
        description="What the reply asked, as its `interrupt` frame carried it."
    )
    status: AskedStatus = Field(
        description="`waiting`: no answer yet; `answered`: see `decision`; `stopped`: the "
        "run was stopped while it waited, unanswered."
    )
    decision: Any = Field(
        default=None, description="The person's answer, once `answered`; null otherwise."
    )


class TranscriptTurn(WireModel):
    """One public turn of a conversation: what the user said or what the agent replied,
    with what it showed while it streamed."""

    id: str = Field(default="", description="Stable for the life of the conversation.")
    role: Literal["user", "assistant"]
    text: str
    tool_calls: list[str] = Field(description="Tool names the agent called for this reply.")
    stop_reason: StopReason | None = Field(
        default=None, description="Why the reply ended; null on user turns."
    )
    thinking: str = Field(default="", description="The public reasoning the reply showed.")
    activity: list[Activity] = Field(
        default_factory=list, description="The tools the reply called, in order."
    )
    meta: TurnMeta = Field(default_factory=TurnMeta)
    asked: TurnAsked | None = Field(
        default=None,
        description="On a reply that asked a person for a decision: what it asked "
        "and how that ended; null on every other turn.",
    )
    siblings: int = Field(
        default=1,
        description="Alternatives at this point of the conversation (regenerated replies, "
        "edited messages); 1 when there are none.",
    )
    sibling_index: int = Field(default=0, description="Which of them this branch shows.")


class Transcript(WireModel):
    """Body of `GET /agents/{agent}/contexts/{contextId}`: what a resumed UI shows."""

    context_id: str
    agent: str
    title: str | None = None
    turns: list[TranscriptTurn]
    active_run_id: str | None = Field(
        default=None,
        description="The run in progress, if any: attach to its events to follow it.",
    )
    pending_interrupt: InterruptRequest | None = Field(
        default=None, description="A decision the conversation waits for, if any."
    )
    has_earlier: bool = Field(
        default=False,
        description=(
            "A page (`limit`) that does not reach the conversation's start: the exchanges"
            " before it are read with `before` set to its first turn's id."
        ),
    )


ConversationStatus = Literal["idle", "running", "waiting"]


class ConversationSummary(WireModel):
    """One of the caller's conversations, in `GET /agents/{agent}/contexts`."""

    context_id: str
    title: str | None
    created_at: float
    updated_at: float
    turn_count: int = Field(description="Turns on the conversation's current branch.")
    preview: str = Field(description="The start of its latest public text.")
    status: ConversationStatus = Field(
        description="`running`: a reply is streaming; `waiting`: a decision is pending."
    )


class ConversationPage(WireModel):
    """Body of `GET /agents/{agent}/contexts`: the caller's conversations, the most
    recently active first."""

    conversations: list[ConversationSummary]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class RenameRequest(WireModel):
    """Body of `PATCH /agents/{agent}/contexts/{contextId}`: at most 200 characters."""

    title: str = Field(min_length=1)


class EditRequest(WireModel):
    """Body of `POST …/edits`: send `message` in place of the user's turn `turnId` (of
    any branch: its branch is shown first), on a new branch; the reply streams as for a
    send."""

    turn_id: TurnId
    message_id: MessageId | None = None
    message: Message
    data: PublicData | None = None


class RegenerateRequest(WireModel):
    """Body of `POST …/regenerate`: answer the last message again, on a new branch."""

    message_id: MessageId | None = None
    turn_id: TurnId | None = Field(default=None, description=REGENERATE_TURN_ID)


class BranchRequest(WireModel):
    """Body of `POST …/branch`: show alternative `index` at the turn `turnId`."""

    turn_id: TurnId
    index: int = Field(ge=0, lt=MAX_BRANCHES, strict=True)  # "1" is not a number


class Ticket(WireModel):
    """Body of `POST /agents/{agent}/tickets`: a short-lived credential for one WebSocket
    handshake (`…/ws?ticket=…`), for clients that authenticate with headers, which a
    browser cannot put on a WebSocket."""

    ticket: str
    expires_in: float = Field(description="Seconds the ticket stays good for.")


class StopResult(WireModel):
    """Body of `POST …/stop`."""

    context_id: str
    run_id: str | None = Field(description="The run being stopped; null if none was running.")
    stopping: bool


class ErrorDetail(WireModel):
    # `interruptId` is left out when it does not apply, so it is optional in the schema.
    model_config = ConfigDict(
        **{**WireModel.model_config, "json_schema_serialization_defaults_required": False}
    )

    code: str = Field(description="Stable, machine-readable error code.")
    message: str = Field(description="Human-readable explanation.")
    retryable: bool = Field(
        default=False, description="The same request may succeed when tried again later."
    )
    interrupt_id: str | None = Field(
        default=None, description="With `decision_pending`: the interrupt to answer first."
    )


class ErrorBody(WireModel):
    """Body of every 4xx response."""

    error: ErrorDetail
