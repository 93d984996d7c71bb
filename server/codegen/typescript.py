"""The JSON Schema and the TypeScript types and constants of the wire, from `thinwire.wire`
and `thinwire.codes`.

Only the JSON Schema shapes the wire models use are translated; anything else raises,
so a new kind of field cannot silently become `unknown` in TypeScript.
"""

from __future__ import annotations

import copy
import json
from typing import Any, get_args

from jinja2 import Environment
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from thinwire import codes, wire

__all__ = [
    "BANNER",
    "REQUESTS",
    "RESPONSES",
    "json_schema",
    "published_schema",
    "ts_type",
    "typescript",
]

BANNER = "@generated — DO NOT EDIT. Produced from server/thinwire/wire.py by `make schema`."

REQUESTS: list[type[BaseModel]] = [
    wire.RunRequest,
    wire.SendCommand,
    wire.AttachCommand,
    wire.StopCommand,
    wire.DecideCommand,
    wire.EditCommand,
    wire.RegenerateCommand,
    wire.DecisionRequest,
    wire.RenameRequest,
    wire.EditRequest,
    wire.RegenerateRequest,
    wire.BranchRequest,
]
RESPONSES: list[type[BaseModel]] = [
    wire.RunStartFrame,
    wire.TitleFrame,
    wire.ThinkingFrame,
    wire.ToolCallFrame,
    wire.ToolResultFrame,
    wire.TokenFrame,
    wire.InterruptFrame,
    wire.DoneFrame,
    wire.ErrorFrame,
    wire.Transcript,
    wire.ConversationPage,
    wire.StopResult,
    wire.Ticket,
    wire.ErrorBody,
    wire.RejectedFrame,
    wire.Heartbeat,
]

FRAMES = [m for m in RESPONSES if m.__name__.endswith("Frame")]

TS_TEMPLATE = """\
// {{ banner }}

export const PROTOCOL_VERSION = {{ version | tojson }};
export const PROTOCOL_HEADER = {{ header | tojson }};
/** On an SSE stream: seconds of silence after which the server sends a heartbeat ("0": none). */
export const HEARTBEAT_HEADER = {{ heartbeat_header | tojson }};
{% for model in models %}
{% if model.description %}/** {{ model.description }} */
{% endif %}export interface {{ model.name }} {
{% for field in model.fields %}{% if field.description %}  /** {{ field.description }} */
{% endif %}  {{ field.name }}{{ "" if field.required else "?" }}: {{ field.type }};
{% endfor %}}
{% endfor %}
/** Every frame the server sends, discriminated by `type`. */
export type Frame =
{% for name in frames %}  | {{ name }}{{ ";" if loop.last else "" }}
{% endfor %}
/** Every WebSocket command a client sends, discriminated by `type`. */
export type Command =
  | SendCommand
  | AttachCommand
  | StopCommand
  | DecideCommand
  | EditCommand
  | RegenerateCommand;

export type FrameType = Frame["type"];
export type StopReason = DoneFrame["stopReason"];

/** The WebSocket subprotocol: the protocol version, where a browser cannot send headers. */
export const WEBSOCKET_SUBPROTOCOL = {{ subprotocol | tojson }};

/** The same protocol with several frames to a message, one per line: offered first. */
export const WEBSOCKET_SUBPROTOCOL_LINES = {{ subprotocol_lines | tojson }};

/** The most exchanges one page of a transcript holds (`GET …/contexts/{id}?limit=`). */
export const MAX_TRANSCRIPT_PAGE = {{ max_transcript_page }};

/** Every frame type of this protocol version; a client ignores any other. */
export const FRAME_TYPES: readonly FrameType[] = {{ frame_types | tojson }};

export const STOP_REASONS: readonly StopReason[] = {{ stop_reasons | tojson }};

/** Error codes the server sends. */
export type ServerErrorCode =
{% for code in server_codes %}  | {{ code | tojson }}{{ ";" if loop.last else "" }}
{% endfor %}
/** Error codes the client raises by itself. */
export type ClientErrorCode =
{% for code in client_codes %}  | {{ code | tojson }}{{ ";" if loop.last else "" }}
{% endfor %}
/** Every error code a client can meet. */
export type ErrorCode = ServerErrorCode | ClientErrorCode;

/** What each error code means. */
export const ERROR_CODES: Readonly<Record<ErrorCode, string>> = {
{% for code, text in descriptions %}  {{ code }}: {{ text | tojson }},
{% endfor %}};

/** Codes for which the same request may succeed when tried again later. */
export const RETRYABLE_CODES: ReadonlySet<string> = new Set({{ retryable | tojson }});

/** The WebSocket close codes the server uses, with the error a client reports for each. */
export const CLOSE_CODES: Readonly<Record<number, ErrorCode>> = {
{% for number, code in close_codes %}  {{ number }}: {{ code | tojson }},
{% endfor %}};
"""


def json_schema() -> dict[str, Any]:
    """The wire models' JSON Schema: what `wire.ts` is made from."""
    pairs = [(m, "validation") for m in REQUESTS] + [(m, "serialization") for m in RESPONSES]
    _, schema = models_json_schema(pairs, by_alias=True, title="thinwire wire protocol")  # type: ignore[arg-type]
    schema["$comment"] = BANNER
    schema["x-protocol-version"] = wire.PROTOCOL_VERSION
    return schema


def published_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`wire.schema.json`: `schema` with what a client in another language finds in
    `wire.ts` beside the models — `Frame`, the union of frames by `type`, and
    `ServerErrorCode`, every `code` the server sends. (In `wire.ts` a `code` stays a
    string: a later server sends codes of its own.)"""
    defs = copy.deepcopy(schema["$defs"])
    defs["ServerErrorCode"] = {
        "description": "Every error code this server sends (the protocol's docs say when). "
        "A later server may send others: a receiver takes an unknown code as an error of "
        "its HTTP status.",
        "enum": sorted(codes.ERROR_CODES),
        "type": "string",
    }
    for name in ("ErrorDetail", "ErrorFrame", "RejectedFrame"):
        code = defs[name]["properties"]["code"]
        code.pop("type")
        code["$ref"] = "#/$defs/ServerErrorCode"
    defs["Frame"] = {
        "description": "Every frame the server sends, told apart by `type` (`rejected` only "
        "over a WebSocket). A receiver ignores a frame whose `type` is none of these.",
        "oneOf": [{"$ref": f"#/$defs/{m.__name__}"} for m in FRAMES],
        # Each member's `type` is a `const`; no `mapping`, which Ajv's `discriminator`
        # refuses.
        "discriminator": {"propertyName": "type"},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:thinwire:wire:v{wire.PROTOCOL_VERSION}",
        **schema,
        "$defs": dict(sorted(defs.items())),
    }


def ts_type(prop: dict[str, Any]) -> str:
    if not set(prop) - {"description", "title", "default"}:
        return "unknown"  # any JSON value
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if "const" in prop:
        return json.dumps(prop["const"])
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " | ".join(ts_type(p) for p in prop["anyOf"])
    kind = prop.get("type")
    if kind == "string":
        return "string"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "object" and prop.get("additionalProperties") is True:
        return "Record<string, unknown>"
    if kind == "array":
        item = ts_type(prop["items"])
        return f"({item})[]" if "|" in item else f"{item}[]"
    raise ValueError(f"no TypeScript translation for JSON Schema {prop!r}")


def typescript(schema: dict[str, Any]) -> str:
    models = []
    for name, definition in schema["$defs"].items():
        required = set(definition.get("required", []))
        fields = [
            {
                "name": prop_name,
                "type": ts_type(prop),
                "required": prop_name in required,
                "description": prop.get("description", ""),
            }
            for prop_name, prop in definition["properties"].items()
        ]
        description = " ".join(definition.get("description", "").split())
        models.append({"name": name, "description": description, "fields": fields})
    frames = [m.__name__ for m in FRAMES]
    env = Environment(keep_trailing_newline=True, autoescape=False)
    env.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    return env.from_string(TS_TEMPLATE).render(
        banner=BANNER,
        version=wire.PROTOCOL_VERSION,
        header=wire.PROTOCOL_HEADER,
        heartbeat_header=wire.HEARTBEAT_HEADER,
        models=models,
        frames=frames,
        subprotocol=wire.WEBSOCKET_SUBPROTOCOL,
        subprotocol_lines=wire.WEBSOCKET_SUBPROTOCOL_LINES,
        max_transcript_page=wire.MAX_TRANSCRIPT_PAGE,
        frame_types=[m.model_fields["type"].default for m in FRAMES],
        stop_reasons=list(get_args(wire.StopReason)),
        server_codes=sorted(codes.ERROR_CODES),
        client_codes=sorted(codes.CLIENT_ERROR_CODES),
        descriptions=sorted([*codes.ERROR_CODES.items(), *codes.CLIENT_ERROR_CODES.items()]),
        retryable=sorted(codes.RETRYABLE_CODES),
        close_codes=sorted(codes.CLOSE_CODES.items()),
    )
