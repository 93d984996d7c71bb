"""Frames to AG-UI events: a thinwire run as `@ag-ui/client` (protocol 1.0) reads it.

    run_start     RUN_STARTED {threadId, runId: the request's, protocolVersion,
                  metadata.thinwire: {contextId, runId, turnId}}
    thinking      REASONING_START, REASONING_MESSAGE_START (before the first delta of a
                  stretch), REASONING_MESSAGE_CONTENT
    token         TEXT_MESSAGE_START (before the first delta of a stretch),
                  TEXT_MESSAGE_CONTENT
    tool_call     TOOL_CALL_START {toolCallName, parentMessageId}, TOOL_CALL_ARGS "{}",
                  TOOL_CALL_END
    tool_result   TOOL_CALL_RESULT {content: "" or "The tool failed.",
                  metadata.thinwire.ok}
    interrupt     (kept for the run's end)
    title         CUSTOM "thinwire:title" {title}
    error         RUN_ERROR {message, code, metadata.thinwire.retryable}
    done          RUN_FINISHED, its outcome `success` (end), `cancelled` (stopped, or cut
                  short by the server going down) or `interrupt` (waiting for a decision);
                  nothing after a RUN_ERROR, which ends a run for the protocol

A stretch of text or reasoning ends (TEXT_MESSAGE_END; REASONING_MESSAGE_END and
REASONING_END) before anything else is shown: the client refuses to finish a run with a
message open. Every stretch of a reply reopens the same message — the reply's turn id
for its text, `{turnId}-reasoning` for its thinking — which the client appends to, so
the client holds the reply as the transcript does: one assistant message, one reasoning
message, the tools in between.

The agent's tools run on the server: their arguments and outputs never reach a frame,
so they cannot reach an event. A call's arguments are `{}` and its result empty (or a
fixed sentence); the result is sent all the same, or the client would count the call
as one the application has to answer (`pendingToolCallIds`).

An interrupt is AG-UI's own: the run finishes with an `interrupt` outcome and the client
answers it with `resume` on its next run (see `interrupt_of`).
"""

from __future__ import annotations

from typing import Any

from thinwire.jsontext import dumps

__all__ = [
    "PROTOCOL_VERSION",
    "TITLE_EVENT",
    "TOOL_FAILED",
    "Event",
    "Events",
    "interrupt_of",
]

#: The protocol version this face speaks, declared on every RUN_STARTED.
PROTOCOL_VERSION = "1.0"
#: The CUSTOM event that names the conversation.
TITLE_EVENT = "thinwire:title"
#: What a failed tool's result says: the error itself stays on the server.
TOOL_FAILED = "The tool failed."

Event = dict[str, Any]


def interrupt_of(request: dict[str, Any]) -> Event:
    """A thinwire interrupt request as an AG-UI `Interrupt`: the prompt its message, the
    answers it takes its `responseSchema` (the options as an enum, and the decision
    schema), the options and the public payload under `metadata.thinwire`."""
    schemas: list[dict[str, Any]] = []
    if request.get("options") is not None:
        schemas.append({"enum": request["options"]})
    if request.get("decisionSchema") is not None:
        schemas.append(request["decisionSchema"])
    interrupt: Event = {
        "id": request["interruptId"],
        "reason": "input_required",
        "message": request["prompt"],
    }
    if schemas:
        interrupt["responseSchema"] = schemas[0] if len(schemas) == 1 else {"allOf": schemas}
    interrupt["metadata"] = {
        "thinwire": {"options": request.get("options"), "payload": request.get("payload")}
    }
    return interrupt


class Events:
    """Translates the frames of one stream, in order, into the events of one AG-UI run.

    The run is the request's: `thread_id` and `run_id` are the client's names for it.
    """

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.started = False
        #: The reply's message id: its turn id, once `run_start` names it.
        self.reply = run_id
        self.text_open = False
        self.reasoning_open = False
        self.interrupts: list[Event] = []
        self.failed = False

    def encode(self, frame: dict[str, Any]) -> list[str]:
        """The events of one frame, as SSE `data` (JSON)."""
        return [dumps(event) for event in self.translate(frame)]

    def start(
        self, context_id: str, run_id: str | None = None, turn_id: str | None = None
    ) -> Event:
        """RUN_STARTED, once per stream: thinwire's ids of the run under `metadata`."""
        self.started = True
        thinwire = {"contextId": context_id, "runId": run_id, "turnId": turn_id}
        return {
            "type": "RUN_STARTED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "protocolVersion": PROTOCOL_VERSION,
            "metadata": {"thinwire": thinwire},
        }

    def ask(self, request: dict[str, Any]) -> None:
        """The run waits for an answer to `request`: its RUN_FINISHED will say so."""
        self.interrupts.append(interrupt_of(request))

    def finish(self, stop_reason: str) -> Event:
        """RUN_FINISHED, with the outcome `stop_reason` comes to."""
        if self.interrupts and stop_reason == "interrupted":
            outcome: Event = {"type": "interrupt", "interrupts": self.interrupts}
        elif stop_reason == "end":
            outcome = {"type": "success"}
        else:  # stopped, cut short by the server going down, or failed (told to `connect`)
            outcome = {"type": "cancelled"}
        return {
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "outcome": outcome,
            "metadata": {"thinwire": {"stopReason": stop_reason}},
        }

    def translate(self, frame: dict[str, Any]) -> list[Event]:
        kind = frame.get("type")
        if kind == "run_start":
            self.reply = frame.get("turnId") or frame["runId"]
            if self.started:  # announced already (a thread's events, then its run's)
                return []
            return [self.start(frame["contextId"], frame["runId"], frame.get("turnId"))]
        if kind == "thinking":
            return [*self._end_text(), *self._open_reasoning(), self._delta(frame)]
        if kind == "token":
            return [*self._end_reasoning(), *self._open_text(), self._delta(frame)]
        if kind == "title":
            return [{"type": "CUSTOM", "name": TITLE_EVENT, "value": {"title": frame["title"]}}]
        if kind not in ("tool_call", "tool_result", "interrupt", "error", "done"):
            return []  # a frame kind this face does not show
        ended = [*self._end_text(), *self._end_reasoning()]
        if kind == "tool_call":
            return ended + self._tool_call(frame)
        if kind == "tool_result":
            return [*ended, self._tool_result(frame)]
        if kind == "interrupt":
            self.ask(frame["interrupt"])
            return ended
        if kind == "error":
            self.failed = True
            return [*ended, self._error(frame)]
        # After RUN_ERROR the protocol allows nothing more in the run.
        return ended if self.failed else [*ended, self.finish(frame["stopReason"])]

    @property
    def reasoning(self) -> str:
        return f"{self.reply}-reasoning"

    def _open_text(self) -> list[Event]:
        if self.text_open:
            return []
        self.text_open = True
        return [{"type": "TEXT_MESSAGE_START", "messageId": self.reply, "role": "assistant"}]

    def _open_reasoning(self) -> list[Event]:
        if self.reasoning_open:
            return []
        self.reasoning_open = True
        return [
            {"type": "REASONING_START", "messageId": self.reasoning},
            {"type": "REASONING_MESSAGE_START", "messageId": self.reasoning, "role": "reasoning"},
        ]

    def _delta(self, frame: dict[str, Any]) -> Event:
        if frame["type"] == "token":
            return {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": self.reply,
                "delta": frame["delta"],
            }
        return {
            "type": "REASONING_MESSAGE_CONTENT",
            "messageId": self.reasoning,
            "delta": frame["delta"],
        }

    def _end_text(self) -> list[Event]:
        if not self.text_open:
            return []
        self.text_open = False
        return [{"type": "TEXT_MESSAGE_END", "messageId": self.reply}]

    def _end_reasoning(self) -> list[Event]:
        if not self.reasoning_open:
            return []
        self.reasoning_open = False
        return [
            {"type": "REASONING_MESSAGE_END", "messageId": self.reasoning},
            {"type": "REASONING_END", "messageId": self.reasoning},
        ]

    def tool_call_id(self, frame: dict[str, Any]) -> str:
        # Call ids count from 1 in every run; a reply is one run, and its turn id is
        # never given twice in a conversation.
        return f"{self.reply}-{frame['callId']}"

    def _tool_call(self, frame: dict[str, Any]) -> list[Event]:
        call_id = self.tool_call_id(frame)
        return [
            {
                "type": "TOOL_CALL_START",
                "toolCallId": call_id,
                "toolCallName": frame["name"],
                "parentMessageId": self.reply,
            },
            {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": "{}"},
            {"type": "TOOL_CALL_END", "toolCallId": call_id},
        ]

    def _tool_result(self, frame: dict[str, Any]) -> Event:
        call_id = self.tool_call_id(frame)
        return {
            "type": "TOOL_CALL_RESULT",
            "messageId": f"{call_id}-result",
            "toolCallId": call_id,
            "content": "" if frame["ok"] else TOOL_FAILED,
            "role": "tool",
            "metadata": {"thinwire": {"ok": frame["ok"]}},
        }

    def _error(self, frame: dict[str, Any]) -> Event:
        return {
            "type": "RUN_ERROR",
            "message": frame["message"],
            "code": frame["code"],
            "metadata": {"thinwire": {"retryable": frame["retryable"]}},
        }
