"""The model a `ChatAgent` streams from in `make bench`: thinwire's OpenAI-compatible stub
(`thinwire.testing.openai_stub`), answering every request at full speed with the deltas
its last user message asks for ("200": "w0 ", "w1 ", … "w199 ", one chunk each).

It runs in a process of its own (`python -m bench.serve openai-stub`), so its CPU is
never counted as the server's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.generator import LoadGenerator
from bench.procs import free_port, python_server, started
from bench.servers import DEFAULT_DELTAS, delta
from bench.throughput import measure, server_for
from thinwire.testing.openai_stub import OpenAIStub, Stream, StreamReply, chunk, finish, usage

__all__ = ["ModelPlan", "run_model", "stub_app"]


def deltas_asked(body: dict[str, object]) -> int:
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                text = str(message.get("content", ""))
                return int(text) if text.isdigit() else DEFAULT_DELTAS
    return DEFAULT_DELTAS


def stub_app(heartbeat: float = 15.0) -> Starlette:
    stub = OpenAIStub()  # only its reply streaming is used: no thread, no port of its own

    async def completions(request: Request) -> Response:
        count = deltas_asked(await request.json())
        chunks = [chunk({"content": delta(i)}) for i in range(count)]
        reply = Stream([*chunks, finish(), usage(1, count)])
        return StreamReply(stub, reply)  # type: ignore[return-value]

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/healthz", health),
        ]
    )


@dataclass(frozen=True)
class ModelPlan:
    deltas: int = 200
    #: (concurrency, streams in all)
    cells: tuple[tuple[int, int], ...] = ((1, 50), (50, 300))
    budget: float = 20.0
    rounds: int = 3


def run_model(plan: ModelPlan, generator: LoadGenerator) -> list[dict[str, Any]]:
    """A `ChatAgent` streaming the stub's deltas, and the `deltas` agent saying the same
    deltas with `run.say` as they would come from a model (one per event-loop tick: the
    ChatAgent reads each chunk of the stub's stream as it arrives), on one thinwire
    server: rounds of each, side by side; and the `sdk` agent, the same model streamed
    by hand through the SDK, for what talking to a model costs any agent."""
    stub_port = free_port()
    stub_argv = python_server("openai-stub", stub_port)
    rows: list[dict[str, Any]] = []
    with started("openai-stub", stub_argv, stub_port, helper=True):
        model_url = f"http://127.0.0.1:{stub_port}/v1"
        with server_for("thinwire", "--model-url", model_url) as (server, say):
            targets = {
                "thinwire-say": replace(say, name="thinwire-say"),
                "thinwire-chat": replace(say, name="thinwire-chat", path="/agents/chat/runs"),
                "thinwire-sdk": replace(say, name="thinwire-sdk", path="/agents/sdk/runs"),
            }
            paces = {"thinwire-say": "yield", "thinwire-chat": "burst", "thinwire-sdk": "burst"}
            for name, target in targets.items():
                generator.run(target, 10, 40, plan.deltas, plan.budget, paces[name])  # warm-up
            for round_ in range(1, plan.rounds + 1):
                for concurrency, streams in plan.cells:
                    for name, target in targets.items():
                        rows.append(
                            measure(
                                generator,
                                name,
                                server,
                                target,
                                concurrency,
                                streams,
                                plan.deltas,
                                plan.budget,
                                paces[name],
                                workload="model",
                                round_=round_,
                            )
                        )
    return rows
