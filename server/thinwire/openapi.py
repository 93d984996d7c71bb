"""The OpenAPI 3.1 document of the HTTP surface, served at `/openapi.json`.

Built from the same pydantic models as the wire, so it cannot drift from what the
server accepts and returns. Streams are documented as `text/event-stream` of frames: each
event's `data` is one of `Frame`, told apart by its `type`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from thinwire import wire
from thinwire.admin import MAX_AUDIT_PAGE, StatePatch
from thinwire.metrics import CONTENT_TYPE as METRICS_TYPE

__all__ = ["openapi_document"]

REF = "#/components/schemas/{model}"
CONTEXT_ID = {"type": "string", "pattern": r"^ctx-[0-9a-f]{36}$"}
#: Every error a route may answer, with its status; each has the ErrorBody shape.
ERRORS = {
    "400": "Malformed request: bad JSON, an invalid field, a malformed id, another protocol.",
    "401": "No principal could be identified.",
    "404": "No such agent, context (for this principal) or interrupt.",
    "409": "The context is busy, waits for a decision, or the interrupt was answered.",
    "413": "The body or the message is too large.",
    "415": "The body is not application/json.",
    "429": "Too many runs or streams of this principal: rate_limited, too_many_runs, "
    "too_many_streams.",
}
#: Every frame a stream sends (`rejected` is the WebSocket's alone).
FRAMES: tuple[type[BaseModel], ...] = get_args(get_args(wire.Frame)[0])
#: The version a client speaks; without it, this one. Another is `protocol_mismatch`.
PROTOCOL = {
    "name": wire.PROTOCOL_HEADER,
    "in": "header",
    "required": False,
    "schema": {"type": "string", "enum": [wire.PROTOCOL_VERSION]},
}


def ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": REF.format(model=model.__name__)}


def json_content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def operation(
    summary: str,
    parameters: list[dict[str, Any]],
    ok: dict[str, Any],
    *,
    body: type[BaseModel] | dict[str, Any] | None = None,
    errors: Sequence[str] = ("400", "401", "404"),
    versioned: bool = True,
) -> dict[str, Any]:
    """An operation of the API; `versioned` ones check `Thinwire-Protocol` (the operator
    API's do not). A `body` given as a schema is optional."""
    responses = {**ok}
    for status in errors:
        responses[status] = {
            "description": ERRORS[status],
            "content": json_content(ref(wire.ErrorBody)),
        }
    if versioned:
        parameters = [*parameters, PROTOCOL]
    result: dict[str, Any] = {"summary": summary, "parameters": parameters, "responses": responses}
    if isinstance(body, dict):
        result["requestBody"] = {"required": False, "content": json_content(body)}
    elif body is not None:
        result["requestBody"] = {"required": True, "content": json_content(ref(body))}
    return result


#: One server-sent event: `id` is the frame's seq, `data` the frame as one line of JSON.
#: There is no `event:` line: the frame's `type` says what it is.
SSE_EVENT = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$", "description": "The frame's seq."},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": REF.format(model="Frame")},
            "description": "The frame, as one line of JSON.",
        },
    },
    "required": ["data"],
}
#: The union of `FRAMES`, by `type`.
FRAME_UNION = {
    "description": "A frame of a run's stream, told apart by its `type`. A client ignores a "
    "frame whose `type` is none of these (a later version's).",
    "oneOf": [ref(m) for m in FRAMES],
    "discriminator": {
        "propertyName": "type",
        "mapping": {m.model_fields["type"].default: REF.format(model=m.__name__) for m in FRAMES},
    },
}
#: The body of a request that takes none (a stop, a clear): nothing, or `{}`.
NO_FIELDS = {"type": "object", "additionalProperties": False}

#: A stop's errors: the owner's route and the operator's answer alike.
STOP_ERRORS = ("400", "401", "404", "409", "413", "415")


def stopped() -> dict[str, Any]:
    """A stop's answer (`wire.StopResult`), the owner's and the operator's."""
    return {"200": {"description": "Stop result", "content": json_content(ref(wire.StopResult))}}


def event_stream(description: str) -> dict[str, Any]:
    return {
        "200": {
            "description": description,
            "content": {"text/event-stream": {"schema": SSE_EVENT}},
        }
    }


def openapi_document(agents: Sequence[str], *, operator_api: bool) -> dict[str, Any]:
    requests: list[type[BaseModel]] = [
        wire.RunRequest,
        wire.DecisionRequest,
        wire.RenameRequest,
        wire.EditRequest,
        wire.RegenerateRequest,
        wire.BranchRequest,
        # The operator API's, described to the operator only: to anyone else, not there.
        *([StatePatch] if operator_api else []),
    ]
    models: list[type[BaseModel]] = [
        *requests,
        wire.Transcript,
        wire.StopResult,
        wire.ConversationPage,
        wire.ConversationSummary,
        wire.Ticket,
        wire.ErrorBody,
        *FRAMES,
    ]
    _, schema = models_json_schema(
        [(m, "validation" if m in requests else "serialization") for m in models],
        by_alias=True,
        ref_template=REF,
    )
    schemas = {**schema.get("$defs", {}), "Frame": FRAME_UNION}
    agent = {
        "name": "agent",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "enum": sorted(agents)},
    }
    context = {"name": "context_id", "in": "path", "required": True, "schema": CONTEXT_ID}
    base = "/agents/{agent}/contexts/{context_id}"
    transcript = {
        "200": {"description": "Transcript", "content": json_content(ref(wire.Transcript))}
    }
    transcript_limit = {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": "Only the last exchanges (a message and its reply) of the branch.",
        "schema": {"type": "integer", "minimum": 1, "maximum": wire.MAX_TRANSCRIPT_PAGE},
    }
    transcript_before = {
        "name": "before",
        "in": "query",
        "required": False,
        "description": "A turn's id: the exchanges leading to its exchange, on its branch.",
        "schema": {"type": "string"},
    }
    page_parameters = [
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": 100},
        },
        {"name": "cursor", "in": "query", "required": False, "schema": {"type": "string"}},
    ]
    paths: dict[str, Any] = {
        "/agents/{agent}/tickets": {
            "post": operation(
                "A ticket for one WebSocket handshake (…/ws?ticket=…)",
                [agent],
                {"200": {"description": "Ticket", "content": json_content(ref(wire.Ticket))}},
                errors=("400", "401", "404"),
            )
        },
        "/agents/{agent}/contexts": {
            "get": operation(
                "The caller's conversations, most recently active first",
                [agent, *page_parameters],
                {
                    "200": {
                        "description": "A page of conversations",
                        "content": json_content(ref(wire.ConversationPage)),
                    }
                },
            )
        },
        "/agents/{agent}/runs": {
            "post": operation(
                "Start a run; stream its frames",
                [agent],
                event_stream("The run's frames, ending with done."),
                body=wire.RunRequest,
                errors=("400", "401", "404", "409", "413", "415", "429"),
            )
        },
        base: {
            "get": operation(
                "The public transcript, or a page of it",
                [agent, context, transcript_limit, transcript_before],
                transcript,
            ),
            "patch": operation(
                "Rename the conversation",
                [agent, context],
                {
                    "200": {
                        "description": "The conversation as the list shows it",
                        "content": json_content(ref(wire.ConversationSummary)),
                    }
                },
                body=wire.RenameRequest,
                errors=("400", "401", "404", "409", "413", "415"),
            ),
            "delete": operation(
                "Forget every trace of the conversation",
                [agent, context],
                {"204": {"description": "Forgotten"}},
                errors=("400", "401", "404", "409"),
            ),
        },
        f"{base}/events": {
            "get": operation(
                "Reattach to the latest run",
                [
                    agent,
                    context,
                    {
                        "name": "after",
                        "in": "query",
                        "required": False,
                        "description": "Send only frames with a greater seq.",
                        "schema": {"type": "integer", "minimum": 0, "maximum": wire.MAX_SEQ},
                    },
                    {
                        "name": "Last-Event-ID",
                        "in": "header",
                        "required": False,
                        "description": "As `after` (what an EventSource sends when it "
                        "reconnects); wins over it.",
                        "schema": {"type": "string", "pattern": "^[0-9]{1,16}$"},
                    },
                ],
                {
                    **event_stream("The missing frames, then live ones."),
                    "204": {"description": "Nothing to send"},
                },
                errors=("400", "401", "404", "429"),
            )
        },
        f"{base}/stop": {
            "post": operation(
                "Stop the run in progress",
                [agent, context],
                stopped(),
                body=NO_FIELDS,
                errors=STOP_ERRORS,
            )
        },
        f"{base}/clear": {
            "post": operation(
                "Drop the history, keep the state",
                [agent, context],
                {
                    "200": {
                        "description": "Transcript",
                        "content": json_content(ref(wire.Transcript)),
                    }
                },
                body=NO_FIELDS,
                errors=("400", "401", "404", "409", "413", "415"),
            )
        },
        f"{base}/regenerate": {
            "post": operation(
                "Answer the last message again, on a new branch; stream the run",
                [agent, context],
                event_stream("The new reply's frames."),
                body=wire.RegenerateRequest,
                errors=("400", "401", "404", "409", "413", "415", "429"),
            )
        },
        f"{base}/edits": {
            "post": operation(
                "Send a message in place of one of the user's, on a new branch; stream the run",
                [agent, context],
                event_stream("The reply's frames."),
                body=wire.EditRequest,
                errors=("400", "401", "404", "409", "413", "415", "429"),
            )
        },
        f"{base}/branch": {
            "post": operation(
                "Show another alternative at a turn",
                [agent, context, transcript_limit],
                transcript,
                body=wire.BranchRequest,
                errors=("400", "401", "404", "409", "413", "415"),
            )
        },
        f"{base}/decisions": {
            "post": operation(
                "Answer the pending interrupt; stream the continued run",
                [agent, context],
                event_stream("The continued run's frames."),
                body=wire.DecisionRequest,
                errors=("400", "401", "404", "409", "413", "415", "429"),
            )
        },
        "/healthz": {"get": {"summary": "Liveness", "responses": {"200": {"description": "OK"}}}},
        "/readyz": {
            "get": {
                "summary": "Readiness: the store answers",
                "responses": {
                    "200": {"description": "OK"},
                    "503": {
                        "description": "store_unavailable",
                        "content": json_content(ref(wire.ErrorBody)),
                    },
                },
            }
        },
    }
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": "thinwire", "version": wire.PROTOCOL_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if operator_api:
        document["components"]["securitySchemes"] = {
            "operator": {"type": "http", "scheme": "bearer"}
        }
        admin = f"/admin{base}"
        secured: dict[str, Any] = {"security": [{"operator": []}]}
        paths[f"{admin}/state"] = {
            "get": {
                **operation(
                    "AgentState, writable keys, version",
                    [agent, context],
                    {"200": {"description": "State"}},
                    errors=("400", "401", "404"),
                    versioned=False,
                ),
                **secured,
            },
            "patch": {
                **operation(
                    "Patch several keys atomically",
                    [
                        agent,
                        context,
                        {
                            "name": "If-Match",
                            "in": "header",
                            "required": False,
                            "schema": {"type": "string"},
                        },
                    ],
                    {
                        "200": {"description": "State"},
                        "403": {
                            "description": "write_denied",
                            "content": json_content(ref(wire.ErrorBody)),
                        },
                        "412": {
                            "description": "version_mismatch",
                            "content": json_content(ref(wire.ErrorBody)),
                        },
                    },
                    body=StatePatch,
                    errors=("400", "401", "404", "409", "413", "415"),
                    versioned=False,
                ),
                **secured,
            },
        }
        paths[f"{admin}/usage"] = {
            "get": {
                **operation(
                    "Model tokens, in total and for the latest runs",
                    [agent, context],
                    {"200": {"description": "Usage"}},
                    errors=("400", "401", "404"),
                    versioned=False,
                ),
                **secured,
            }
        }
        key = {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}}
        audit_page = [
            {
                "name": "limit",
                "in": "query",
                "required": False,
                "description": "Only the latest entries (100 unless told).",
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_AUDIT_PAGE},
            },
            {
                "name": "before",
                "in": "query",
                "required": False,
                "description": "An entry's seq: the entries before it.",
                "schema": {"type": "integer", "minimum": 1},
            },
        ]
        paths[f"{admin}/state/{{key}}/history"] = {
            "get": {
                **operation(
                    "One key's audit trail, a page at a time",
                    [agent, context, key, *audit_page],
                    {"200": {"description": "History"}},
                    errors=("400", "401", "404"),
                    versioned=False,
                ),
                **secured,
            }
        }
        paths[f"{admin}/audit"] = {
            "get": {
                **operation(
                    "The audit trail, a page at a time",
                    [agent, context, *audit_page],
                    {"200": {"description": "Audit"}},
                    errors=("400", "401", "404"),
                    versioned=False,
                ),
                **secured,
            }
        }
        paths[f"{admin}/export"] = {
            "get": {
                **operation(
                    "Everything the store holds of the conversation, as one document",
                    [agent, context],
                    {"200": {"description": "Export", "content": json_content({"type": "object"})}},
                    errors=("400", "401", "404"),
                    versioned=False,
                ),
                **secured,
            }
        }
        paths["/admin/agents"] = {
            "get": {
                **operation(
                    "The agents' names",
                    [],
                    {"200": {"description": "Agents"}},
                    errors=("400", "401"),
                    versioned=False,
                ),
                **secured,
            }
        }
        paths["/admin/metrics"] = {
            "get": {
                **operation(
                    "This process's metrics, in Prometheus's text format (0.0.4)",
                    [],
                    {
                        "200": {
                            "description": "Metrics",
                            "content": {METRICS_TYPE: {"schema": {"type": "string"}}},
                        }
                    },
                    errors=("400", "401"),
                    versioned=False,
                ),
                **secured,
            }
        }
        owner = {"name": "owner", "in": "query", "required": True, "schema": {"type": "string"}}
        paths["/admin/agents/{agent}/contexts"] = {
            "get": {
                **operation(
                    "A principal's conversations, most recently active first",
                    [agent, owner, *page_parameters],
                    {"200": {"description": "A page of conversations, with its owner"}},
                    errors=("400", "401", "404"),
                    versioned=False,
                ),
                **secured,
            }
        }
        paths[f"{admin}/stop"] = {
            "post": {
                **operation(
                    "Stop the run in progress, or end the question it waits on, as its owner can",
                    [agent, context],
                    stopped(),
                    body=NO_FIELDS,
                    errors=STOP_ERRORS,
                    versioned=False,
                ),
                **secured,
            }
        }
        paths[admin] = {
            "get": {
                **operation(
                    "The conversation, whoever owns it: owner, version, times, status, and "
                    "its transcript or a page of it",
                    [agent, context, transcript_limit, transcript_before],
                    {"200": {"description": "Conversation"}},
                    errors=("400", "401", "404"),
                    versioned=False,
                ),
                **secured,
            },
            "delete": {
                **operation(
                    "Forget every trace of the conversation, whoever owns it",
                    [agent, context],
                    {"204": {"description": "Forgotten"}},
                    errors=("400", "401", "404", "409"),
                    versioned=False,
                ),
                **secured,
            },
        }
    return document
