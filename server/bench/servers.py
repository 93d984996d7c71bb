"""The Python servers under test, all streaming the same work: N deltas, "w{i} " each.

- `bare`: a Starlette StreamingResponse writing pre-formatted SSE frames, the floor.
- `thinwire`: `create_app` with the default SQLite store, the event log and SSE or
  WebSocket; the agent says N deltas as fast as it can. (With `--store memory`, the
  same without SQLite: what the store costs.)
- `sse-starlette`: `EventSourceResponse`, the common Python choice.

Each app also answers `POST /idle` (bare, sse-starlette) or runs the `gated` agent
(thinwire): a stream that sends nothing but heartbeats until the client leaves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import thinwire
from thinwire import Agent, MemoryStore, Run, SQLiteStore

__all__ = ["APPS", "delta", "expected_text"]

DEFAULT_DELTAS = 200
# The frames of `bare` and `sse-starlette` carry the same fields as thinwire's.
CONTEXT_ID = "ctx-" + "0" * 36
RUN_ID = "run-" + "0" * 32


def delta(i: int) -> str:
    return f"w{i} "


def expected_text(deltas: int) -> str:
    return "".join(delta(i) for i in range(deltas))


async def health(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def deltas_of(request: Request) -> int:
    body = await request.json()
    return int(body.get("deltas", DEFAULT_DELTAS))


def bare_app(heartbeat: float) -> Starlette:
    async def stream(request: Request) -> Response:
        count = await deltas_of(request)

        async def frames() -> AsyncIterator[bytes]:
            for i in range(count):
                yield (
                    f'id: {i + 1}\ndata: {{"contextId":"{CONTEXT_ID}","runId":"{RUN_ID}",'
                    f'"seq":{i + 1},"type":"token","delta":"w{i} "}}\n\n'
                ).encode()
            yield (
                f'id: {count + 1}\ndata: {{"contextId":"{CONTEXT_ID}","runId":"{RUN_ID}",'
                f'"seq":{count + 1},"type":"done","stopReason":"end"}}\n\n'
            ).encode()

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def idle(request: Request) -> Response:
        async def beats() -> AsyncIterator[bytes]:
            yield b": open\n\n"
            while True:
                await asyncio.sleep(heartbeat)
                yield b": heartbeat\n\n"

        return StreamingResponse(beats(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/stream", stream, methods=["POST"]),
            Route("/idle", idle, methods=["POST"]),
            Route("/healthz", health),
        ]
    )


def sse_starlette_app(heartbeat: float) -> Starlette:
    from sse_starlette import EventSourceResponse

    async def stream(request: Request) -> Response:
        count = await deltas_of(request)

        async def events() -> AsyncIterator[dict[str, Any]]:
            for i in range(count):
                frame = {
                    "contextId": CONTEXT_ID,
                    "runId": RUN_ID,
                    "seq": i + 1,
                    "type": "token",
                    "delta": delta(i),
                }
                yield {"id": str(i + 1), "data": json.dumps(frame, separators=(",", ":"))}
            done = {"contextId": CONTEXT_ID, "runId": RUN_ID, "seq": count + 1, "type": "done"}
            yield {"id": str(count + 1), "data": json.dumps(done, separators=(",", ":"))}

        return EventSourceResponse(events())

    async def idle(request: Request) -> Response:
        async def nothing() -> AsyncIterator[dict[str, Any]]:
            yield {"comment": "open"}
            await asyncio.Event().wait()
            yield {}  # pragma: no cover - never reached

        return EventSourceResponse(nothing(), ping=heartbeat)

    return Starlette(
        routes=[
            Route("/stream", stream, methods=["POST"]),
            Route("/idle", idle, methods=["POST"]),
            Route("/healthz", health),
        ]
    )


class Deltas(Agent):
    """Says N deltas ("N" is the message; 200 if it is not a number), no pauses."""

    async def run(self, run: Run, text: str) -> None:
        count = int(text) if text.isdigit() else DEFAULT_DELTAS
        for i in range(count):
            await run.say(delta(i))


class Paced(Agent):
    """Says N deltas in bursts of 25 every 5 ms: a fast model, about 5,000 deltas/s."""

    async def run(self, run: Run, text: str) -> None:
        count = int(text) if text.isdigit() else DEFAULT_DELTAS
        for i in range(count):
            await run.say(delta(i))
            if i % 25 == 24:
                await asyncio.sleep(0.005)


class Gated(Agent):
    """Waits for an event that never comes: its stream only heart-beats."""

    async def run(self, run: Run, text: str) -> None:
        await asyncio.Event().wait()


def thinwire_app(
    heartbeat: float, data_dir: Path | None, page_dir: Path | None = None
) -> Starlette:
    """The default SQLite store in `data_dir`; the memory store when it is None."""
    routes: list[BaseRoute] = []
    if page_dir is not None:
        routes.append(Mount("/page", StaticFiles(directory=page_dir, html=True)))
    return thinwire.create_app(
        {"deltas": Deltas, "paced": Paced, "gated": Gated},
        identify=thinwire.anonymous,
        store=MemoryStore() if data_dir is None else SQLiteStore.in_directory(data_dir),
        runs_per_second=0,
        heartbeat_interval=heartbeat,
        routes=routes,
    )


APPS = {"bare": bare_app, "sse-starlette": sse_starlette_app, "thinwire": thinwire_app}
