"""The Python servers under test, all streaming the same work: N deltas, "w{i} " each.

How the deltas are handed over is the workload, asked for per request (`pace`):

- `burst`: as fast as they come, no await between them (a cached answer replayed);
- `yield`: one await between deltas (`await asyncio.sleep(0)`): one delta per event-loop
  tick, as a model client handing over what it read gives them at best;
- a number: that many seconds between deltas (0.02 is a model at 50 tokens/s).

The servers:

- `bare`: a Starlette StreamingResponse writing pre-formatted SSE frames, one write per
  frame, awaiting between them as the workload says: the floor. `POST /batched` is the
  same work answered in one write: the ceiling (`bare-batched`).
- `thinwire`: `create_app` with the default SQLite store, the event log and SSE or
  WebSocket; the agent says the N deltas with `run.say`, pausing as asked. (With
  `--store memory`, the same with `MemoryStore`, which copies and keeps every write;
  with `--store none`, a store that keeps nothing: what thinwire's path costs without
  its store, `thinwire-nostore`.) With `--model-url`,
  the `chat` agent is a `ChatAgent` over the OpenAI-compatible stub at that URL, and the
  `sdk` agent streams the same model by hand: the SDK's chunks, `run.say` per content.
- `sse-starlette`: `EventSourceResponse`, the common Python choice.

Each app also answers `POST /idle` (bare, sse-starlette) or runs the `gated` agent
(thinwire): a stream that sends nothing but heartbeats until the client leaves.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

import thinwire
from thinwire import Agent, MemoryStore, Run, SQLiteStore
from thinwire.records import ContextRecord
from thinwire.stores import AuditEntry, Event, Store

__all__ = ["APPS", "NoStore", "delta", "expected_text", "pause_of", "store_of", "work_text"]

DEFAULT_DELTAS = 200
# The frames of `bare` and `sse-starlette` carry the same fields as thinwire's.
CONTEXT_ID = "ctx-" + "0" * 36
RUN_ID = "run-" + "0" * 32
#: What a turn of a long conversation says (see `conversations.py`): ~120 and ~430
#: characters, so a 1,000-turn conversation is about 640 KB of JSON.
USER_TEXT = "Could you tell me a little more about that, with an example? " * 2
REPLY_TEXT = "Sure. Here is a longer answer that goes on for a while, as replies do. " * 6


def delta(i: int) -> str:
    return f"w{i} "


def expected_text(deltas: int) -> str:
    return "".join(delta(i) for i in range(deltas))


def pause_of(pace: str) -> float | None:
    """Seconds to await between deltas: None for a burst (no await), 0 for one tick."""
    if pace == "burst":
        return None
    if pace == "yield":
        return 0.0
    return float(pace)


def work_text(deltas: int, pace: str = "burst") -> str:
    """The message asking thinwire's `deltas` agent for this work: "200", "200 yield"."""
    return str(deltas) if pace == "burst" else f"{deltas} {pace}"


def parse_work(text: str) -> tuple[int, float | None]:
    count, _, pace = text.partition(" ")
    return (int(count) if count.isdigit() else DEFAULT_DELTAS), pause_of(pace or "burst")


async def health(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def work_of(request: Request) -> tuple[int, float | None]:
    body = await request.json()
    return int(body.get("deltas", DEFAULT_DELTAS)), pause_of(str(body.get("pace", "burst")))


def bare_frame(i: int) -> bytes:
    return (
        f'id: {i + 1}\ndata: {{"contextId":"{CONTEXT_ID}","runId":"{RUN_ID}",'
        f'"seq":{i + 1},"type":"token","delta":"w{i} "}}\n\n'
    ).encode()


def bare_done(count: int) -> bytes:
    return (
        f'id: {count + 1}\ndata: {{"contextId":"{CONTEXT_ID}","runId":"{RUN_ID}",'
        f'"seq":{count + 1},"type":"done","stopReason":"end"}}\n\n'
    ).encode()


def bare_app(heartbeat: float) -> Starlette:
    async def stream(request: Request) -> Response:
        count, pause = await work_of(request)

        async def frames() -> AsyncIterator[bytes]:
            for i in range(count):
                if i and pause is not None:
                    await asyncio.sleep(pause)
                yield bare_frame(i)
            yield bare_done(count)

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def batched(request: Request) -> Response:
        """The same bytes, paced the same way, in one write."""
        count, pause = await work_of(request)

        async def frames() -> AsyncIterator[bytes]:
            body = []
            for i in range(count):
                if i and pause is not None:
                    await asyncio.sleep(pause)
                body.append(bare_frame(i))
            body.append(bare_done(count))
            yield b"".join(body)

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
            Route("/batched", batched, methods=["POST"]),
            Route("/idle", idle, methods=["POST"]),
            Route("/healthz", health),
        ]
    )


def sse_starlette_app(heartbeat: float) -> Starlette:
    from sse_starlette import EventSourceResponse

    async def stream(request: Request) -> Response:
        count, pause = await work_of(request)

        async def events() -> AsyncIterator[dict[str, Any]]:
            for i in range(count):
                if i and pause is not None:
                    await asyncio.sleep(pause)
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
    """Says N deltas ("N [pace]" is the message; 200 if it is not a number), pausing
    between them as the pace says (none, one loop tick, or so many seconds)."""

    async def run(self, run: Run, text: str) -> None:
        count, pause = parse_work(text)
        if pause is None:
            for i in range(count):
                await run.say(delta(i))
            return
        for i in range(count):
            if i:
                await asyncio.sleep(pause)
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


class Scribe(Agent):
    """An exchange of a long conversation: the reply in one delta, kept in the history
    (with the user's message) as the kit keeps every run's. It reads the conversation as
    a ChatAgent does: its latest 50 messages (`history_window`)."""

    history_window: ClassVar[int | None] = 50

    async def run(self, run: Run, text: str) -> None:
        await run.say(REPLY_TEXT)


class WholeScribe(Scribe):
    """The same, reading the whole conversation on every run (`history_window` None): what
    the live-context cache must hold for an agent that does."""

    history_window: ClassVar[int | None] = None


def chat_agent(model_url: str) -> type[Agent]:
    """A ChatAgent over the OpenAI-compatible stub at `model_url` (see `model.py`)."""
    from thinwire.models import ChatAgent, OpenAIChat

    class Chat(ChatAgent):
        model = OpenAIChat("stub-model", base_url=model_url, api_key="bench", retries=0)
        history_window = 4

    return Chat


def sdk_agent(model_url: str) -> type[Agent]:
    """What an agent streaming the model by hand is: the `openai` SDK's own stream over
    its aiohttp client (as ChatAgent's), `run.say` per content delta, nothing kept but
    the reply. No tools, no journal: the floor of talking to a model."""
    import openai

    clients: list[Any] = []  # made on the server's loop, at the first run

    class Relay(Agent):
        async def run(self, run: Run, text: str) -> None:
            if not clients:
                http = openai.DefaultAioHttpClient()
                client = openai.AsyncOpenAI(base_url=model_url, api_key="bench", http_client=http)
                clients.append(client)
            stream = await clients[0].chat.completions.create(
                model="stub-model", messages=[{"role": "user", "content": text}], stream=True
            )
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    await run.say(chunk.choices[0].delta.content)

    return Relay


class NoStore(MemoryStore):
    """A store that acknowledges every write and keeps none: what thinwire's path costs
    with nothing stored (`thinwire-nostore`). For the bench only: nothing written to it
    can be read back."""

    async def create(self, record: ContextRecord, audit: Sequence[AuditEntry] = ()) -> None:
        pass

    async def save(
        self,
        record: ContextRecord,
        *,
        expected_version: int,
        audit: Sequence[AuditEntry] = (),
        events: Sequence[Event] = (),
        fence: int | None = None,
        trim_before: int | None = None,
    ) -> int:
        return expected_version + 1

    async def append_events(self, context_id: str, events: Sequence[Event]) -> None:
        pass


def store_of(kind: str, data_dir: Path | None) -> Store:
    """`sqlite` (the default, in `data_dir`), `memory` or `none` (NoStore)."""
    if kind == "memory":
        return MemoryStore()
    if kind == "none":
        return NoStore()
    if data_dir is None:
        raise ValueError("the SQLite store needs a data directory")
    return SQLiteStore.in_directory(data_dir)


def thinwire_app(
    heartbeat: float,
    store: Store,
    page_dir: Path | None = None,
    *,
    model_url: str | None = None,
    max_contexts: int = 1000,
) -> Starlette:
    routes: list[BaseRoute] = []
    if page_dir is not None:
        routes.append(Mount("/page", StaticFiles(directory=page_dir, html=True)))
    agents: dict[str, type[Agent]] = {
        "deltas": Deltas,
        "paced": Paced,
        "gated": Gated,
        "scribe": Scribe,
        "scribe-whole": WholeScribe,
    }
    if model_url is not None:
        agents["chat"] = chat_agent(model_url)
        agents["sdk"] = sdk_agent(model_url)
    return thinwire.create_app(
        agents,
        identify=thinwire.anonymous,
        store=store,
        runs_per_second=0,
        max_runs=0,
        max_streams=0,
        heartbeat_interval=heartbeat,
        routes=routes,
        max_contexts=max_contexts,
    )


APPS = {"bare": bare_app, "sse-starlette": sse_starlette_app, "thinwire": thinwire_app}
