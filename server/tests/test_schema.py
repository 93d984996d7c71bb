from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from codegen import generate, main
from codegen.typescript import RESPONSES, ts_type
from thinwire import codes, wire

GENERATED = Path(__file__).resolve().parents[2] / "packages" / "client" / "src" / "generated"


def test_committed_typescript_matches_the_pydantic_models() -> None:
    for name, content in generate().items():
        assert (GENERATED / name).read_text(encoding="utf-8") == content, f"run make schema: {name}"


def test_check_mode_reports_drift(tmp_path: Path) -> None:
    assert main([str(tmp_path), "--check"]) == 1
    assert main([str(tmp_path)]) == 0
    assert main([str(tmp_path), "--check"]) == 0
    (tmp_path / "wire.ts").write_text("// edited by hand\n")
    assert main([str(tmp_path), "--check"]) == 1


def test_regenerating_leaves_unchanged_files_untouched(tmp_path: Path) -> None:
    """make judges the builds after `make schema` by the files' times."""
    assert main([str(tmp_path)]) == 0
    for path in tmp_path.iterdir():  # as if written long ago
        os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    assert main([str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) and all(
        path.stat().st_mtime_ns == 1_000_000_000 for path in tmp_path.iterdir()
    )


def test_generated_files_say_so() -> None:
    files = generate()
    assert files["wire.ts"].startswith("// @generated — DO NOT EDIT")
    assert "make schema" in files["wire.ts"].splitlines()[0]


def test_every_frame_is_in_the_typescript_union() -> None:
    ts = generate()["wire.ts"]
    for model in RESPONSES:
        assert f"export interface {model.__name__} {{" in ts
        if model.__name__.endswith("Frame"):
            assert f"  | {model.__name__}" in ts
    assert '  type: "token";' in ts and "  contextId?: string | null;" in ts


def test_unknown_schema_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="no TypeScript translation"):
        ts_type({"allOf": [{"$ref": "#/$defs/Message"}]})


def test_frames_serialise_with_camel_case_and_type() -> None:
    frame = wire.DoneFrame(
        context_id="ctx-1", run_id="run-1", seq=3, text="t", tool_calls=["a"], stop_reason="end"
    )
    assert frame.model_dump(by_alias=True) == {
        "contextId": "ctx-1",
        "runId": "run-1",
        "seq": 3,
        "type": "done",
        "text": "t",
        "toolCalls": ["a"],
        "stopReason": "end",
    }


def test_the_vocabulary_is_generated_from_the_python_tables() -> None:
    ts = generate()["wire.ts"]
    assert f'export const WEBSOCKET_SUBPROTOCOL = "{wire.WEBSOCKET_SUBPROTOCOL}";' in ts
    lines = wire.WEBSOCKET_SUBPROTOCOL_LINES
    assert f'export const WEBSOCKET_SUBPROTOCOL_LINES = "{lines}";' in ts
    assert (
        '"run_start", "title", "thinking", "tool_call", "tool_result", "token", "interrupt"' in ts
    )
    assert 'export const STOP_REASONS: readonly StopReason[] = ["end", "stopped",' in ts
    for code in [*codes.ERROR_CODES, *codes.CLIENT_ERROR_CODES]:
        assert f'  | "{code}"' in ts and f"  {code}: " in ts
    for number, code in codes.CLOSE_CODES.items():
        assert f'  {number}: "{code}",' in ts


def published() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(generate()["wire.schema.json"])
    return schema


def validator(name: str) -> jsonschema.Draft202012Validator:
    """Checks a value against one definition of the published schema."""
    return jsonschema.Draft202012Validator({**published(), "$ref": f"#/$defs/{name}"})


def test_the_json_schema_says_its_dialect_and_its_id() -> None:
    schema = published()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"urn:thinwire:wire:v{wire.PROTOCOL_VERSION}"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_json_schema_maps_each_frame_type_to_its_definition() -> None:
    """Another language reads `Frame`: one member per `type`, as `wire.ts`'s union."""
    defs = published()["$defs"]
    members = [ref["$ref"].removeprefix("#/$defs/") for ref in defs["Frame"]["oneOf"]]
    types = [defs[name]["properties"]["type"]["const"] for name in members]
    assert members == [m.__name__ for m in RESPONSES if m.__name__.endswith("Frame")]
    assert len(set(types)) == len(types) and "rejected" in types
    assert all("type" in defs[name]["required"] for name in members)
    assert defs["Frame"]["discriminator"] == {"propertyName": "type"}
    frames = [
        json.loads(line.removeprefix("data: "))
        for line in generate()["conformance/demo-run-1.sse"].splitlines()
        if line.startswith("data: ")
    ]
    frame = validator("Frame")
    future = [f for f in frames if f["type"] == "from_the_future"]
    assert len(future) == 1 and not frame.is_valid(future[0])  # a later version's
    assert all(frame.is_valid(f) for f in frames if f not in future)


def test_the_json_schema_lists_the_error_codes_the_server_sends() -> None:
    defs = published()["$defs"]
    assert defs["ServerErrorCode"]["enum"] == sorted(codes.ERROR_CODES)
    for name in ("ErrorDetail", "ErrorFrame", "RejectedFrame"):
        assert defs[name]["properties"]["code"]["$ref"] == "#/$defs/ServerErrorCode"
    body = {"error": {"code": "context_busy", "message": "busy", "retryable": True}}
    assert validator("ErrorBody").is_valid(body)
    assert not validator("ErrorBody").is_valid({"error": {**body["error"], "code": "nope"}})
