from __future__ import annotations

import os
from pathlib import Path

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
