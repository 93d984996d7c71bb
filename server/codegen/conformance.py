"""Cross-language conformance fixtures: a run encoded by this server, and the view state
the TypeScript client must reduce it to.

The stream is the demo agent's real output through the real run log and SSE encoder,
with fixed ids so the fixture is reproducible, plus the things a tolerant receiver must
survive: a heartbeat, a frame sent twice, and a frame type from a future version.
`make schema` writes it beside the generated types; `make check-schema` fails on drift.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from thinwire.contexts import ContextRegistry, new_record
from thinwire.demo import DemoAgent
from thinwire.runlog import RunLog
from thinwire.runner import begin_run, execute
from thinwire.sse import HEARTBEAT, encode
from thinwire.stores import MemoryStore

__all__ = ["demo_run"]

CONTEXT_ID = "ctx-" + "c0ffee" * 6
RUN_ID = "run-" + "0" * 24
MESSAGES = ("first message", "What did I say first?")


async def run_demo() -> list[RunLog]:
    store = MemoryStore()
    registry = ContextRegistry(store, {"demo": DemoAgent})
    await store.create(new_record(CONTEXT_ID, "demo", DemoAgent(), "conformance"))
    context = await registry.get("demo", CONTEXT_ID, "conformance")
    logs = []
    for index, text in enumerate(MESSAGES, start=1):
        log = await begin_run(registry, context, text, run_id=f"{RUN_ID[:-1]}{index}")
        await execute(registry, context, log, text)
        logs.append(log)
    return logs


def expected_view(log: RunLog, text: str) -> dict[str, Any]:
    frames = [json.loads(data) for data in log.frames]
    done = frames[-1]
    return {
        "contextId": CONTEXT_ID,
        "status": "idle",
        "error": None,
        "thinking": "".join(f["delta"] for f in frames if f["type"] == "thinking"),
        "activity": [
            {"callId": f["callId"], "name": f["name"], "state": "ok" if f["ok"] else "error"}
            for f in frames
            if f["type"] == "tool_result"
        ],
        "lastTurns": [
            {"role": "user", "text": text, "toolCalls": [], "streaming": False, "stopReason": None},
            {
                "role": "assistant",
                "text": done["text"],
                "toolCalls": done["toolCalls"],
                "streaming": False,
                "stopReason": done["stopReason"],
            },
        ],
        "result": {
            "text": done["text"],
            "toolCalls": done["toolCalls"],
            "contextId": CONTEXT_ID,
            "runId": done["runId"],
            "stopReason": done["stopReason"],
        },
    }


def encode_with_noise(log: RunLog) -> str:
    out = []
    for index, (seq, data) in enumerate(zip(log.seqs, log.frames, strict=True)):
        out.append(encode(seq, data))
        if index == 0:
            out.append(HEARTBEAT)
            future = {"type": "from_the_future", "contextId": CONTEXT_ID, "runId": log.run_id}
            out.append(f"data: {json.dumps(future)}\n\n".encode())
        if index == 2:
            out.append(encode(seq, data))  # sent twice: must be applied once
    return b"".join(out).decode()


def demo_run() -> dict[str, str]:
    """File name -> content: one SSE stream per run and the expected views."""
    logs = asyncio.run(run_demo())
    files = {}
    runs = []
    for index, (log, text) in enumerate(zip(logs, MESSAGES, strict=True), start=1):
        files[f"conformance/demo-run-{index}.sse"] = encode_with_noise(log)
        runs.append(
            {"message": text, "stream": f"demo-run-{index}.sse", **expected_view(log, text)}
        )
    files["conformance/demo-runs.json"] = json.dumps(runs, indent=2, ensure_ascii=False) + "\n"
    return files
