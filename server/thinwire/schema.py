"""Generate the JSON Schema and TypeScript types of the wire from `thinwire.wire`.

    python -m thinwire.schema OUT_DIR          # write wire.schema.json and wire.ts
    python -m thinwire.schema OUT_DIR --check  # exit 1 when the files on disk drift

Only the JSON Schema shapes the wire models use are translated; anything else raises,
so a new kind of field cannot silently become `unknown` in TypeScript.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from jinja2 import Environment
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from thinwire import wire
from thinwire.conformance import demo_run

__all__ = ["generate", "main"]

REGENERATE = "make schema"
BANNER = f"@generated — DO NOT EDIT. Produced from server/thinwire/wire.py by `{REGENERATE}`."

REQUESTS: list[type[BaseModel]] = [
    wire.RunRequest,
    wire.SendCommand,
    wire.AttachCommand,
    wire.StopCommand,
    wire.DecideCommand,
    wire.DecisionRequest,
]
RESPONSES: list[type[BaseModel]] = [
    wire.RunStartFrame,
    wire.ThinkingFrame,
    wire.ToolCallFrame,
    wire.ToolResultFrame,
    wire.TokenFrame,
    wire.InterruptFrame,
    wire.DoneFrame,
    wire.ErrorFrame,
    wire.Transcript,
    wire.StopResult,
    wire.ErrorBody,
    wire.RejectedFrame,
]

TS_TEMPLATE = """\
// {{ banner }}

export const PROTOCOL_VERSION = {{ version | tojson }};
export const PROTOCOL_HEADER = {{ header | tojson }};
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
export type Command = SendCommand | AttachCommand | StopCommand | DecideCommand;

export type FrameType = Frame["type"];
export type StopReason = DoneFrame["stopReason"];
"""


def json_schema() -> dict[str, Any]:
    pairs = [(m, "validation") for m in REQUESTS] + [(m, "serialization") for m in RESPONSES]
    _, schema = models_json_schema(pairs, by_alias=True, title="thinwire wire protocol")  # type: ignore[arg-type]
    schema["$comment"] = BANNER
    schema["x-protocol-version"] = wire.PROTOCOL_VERSION
    return schema


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
    frames = [m.__name__ for m in RESPONSES if m.__name__.endswith("Frame")]
    env = Environment(keep_trailing_newline=True, autoescape=False)
    return env.from_string(TS_TEMPLATE).render(
        banner=BANNER,
        version=wire.PROTOCOL_VERSION,
        header=wire.PROTOCOL_HEADER,
        models=models,
        frames=frames,
    )


def generate() -> dict[str, str]:
    """File name -> content of every generated file."""
    schema = json_schema()
    return {
        "wire.schema.json": json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
        "wire.ts": typescript(schema),
        **demo_run(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m thinwire.schema")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--check", action="store_true", help="fail when files drift")
    args = parser.parse_args(argv)
    drifted = []
    for name, content in generate().items():
        path = args.out_dir / name
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != content:
                drifted.append(str(path))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
    if drifted:
        print(f"wire types drift from server/thinwire/wire.py: {', '.join(drifted)}")
        print(f"run `{REGENERATE}` and commit the result")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
