"""The A2A tests' server app (`thinwire serve a2a_helpers:app`) and client helpers.

The app authenticates with a bearer token that names the user (`Bearer alice`), says so
on its cards, and serves the demo agent, a paced one, a pondering one, an asking one and
a counting one (it asks for an answer of a schema: a data part).
The paced
agent says five words, waits at a gate the test opens (`POST /test/release`, which
answers how many runs were waiting there), records a side effect (`GET /test/effects`),
calls a tool, then says five more: so a test can act mid-run, and tell whether cancelled
work went on, without sleeping. The pondering agent thinks and calls a tool before it
says anything, then waits at the same gate: a stream that attaches finds those frames
at hand. The asking agent asks whether to go on, and once answered waits at the gate: a
task whose second run works until the test says.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types import Message, Role, SendMessageRequest, StreamResponse, Task
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from thinwire import Agent, MemoryStore, Run, create_app
from thinwire.a2a import A2A, Security, Skill
from thinwire.demo import DemoAgent

USERS = ("alice", "bob")


def bearer_user(connection: HTTPConnection) -> str | None:
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    return token if scheme == "Bearer" and token in USERS else None


class Gate:
    opened = asyncio.Event()
    waiting: ClassVar[set[str]] = set()
    effects: ClassVar[list[str]] = []


class Paced(Agent):
    """Says five words, waits at the gate, calls a tool, says five more (and, asked for
    "three parts", waits again and says five more)."""

    description = "Counts to five, waits for the test's gate, then counts on."
    skills = (Skill("count", "Count", "Counts in two halves.", ("test",), ("go",)),)

    async def tally(self, words: int) -> dict[str, int]:
        return {"counted": words}

    async def run(self, run: Run, text: str) -> None:
        for part in "abc" if text == "three parts" else "ab":
            if part != "a":
                Gate.waiting.add(run.run_id)
                try:
                    await Gate.opened.wait()
                finally:
                    Gate.waiting.discard(run.run_id)
                Gate.effects.append(f"{text}: {part}")  # a side effect, after the gate
                await run.tool("tally", self.tally, words=5)
            for n in range(5):
                await run.say(f"{part}{n} ")


class Pondering(Agent):
    """Thinks, calls a tool, waits at the gate, then says a few words."""

    async def look_up(self) -> dict[str, bool]:
        return {"found": True}

    async def run(self, run: Run, text: str) -> None:
        opened = Gate.opened  # taken first: a release once anything was shown opens it
        Gate.waiting.add(run.run_id)
        try:
            await run.think("Thinking first. ")
            await run.tool("look_up", self.look_up)
            await opened.wait()
        finally:
            Gate.waiting.discard(run.run_id)
        await run.say("Then a few words.")


class Asking(Agent):
    """Asks whether to go on; answered, says it waits, waits at the gate, goes on."""

    async def run(self, run: Run, text: str) -> None:
        await run.say("Asking. ")
        await run.interrupt("Go on?", options=["yes"])
        opened = Gate.opened  # taken first: a release once it said it waits opens it
        Gate.waiting.add(run.run_id)
        try:
            await run.say("Waiting. ")
            await opened.wait()
        finally:
            Gate.waiting.discard(run.run_id)
        await run.say("Went on.")


class Amount(BaseModel):
    amount: int


class Counting(Agent):
    """Asks how many, an answer of its schema, and says it."""

    async def run(self, run: Run, text: str) -> None:
        picked = await run.interrupt("How many?", schema=Amount)
        await run.say(f"{picked.amount} it is.")


async def release(request: Request) -> Response:
    """Open the gate for the runs waiting at it: how many there were."""
    waiting = len(Gate.waiting)
    Gate.opened.set()
    Gate.opened = asyncio.Event()
    return JSONResponse({"released": waiting})


async def effects(request: Request) -> Response:
    return JSONResponse({"effects": Gate.effects})


app = create_app(
    {
        "demo": DemoAgent,
        "paced": Paced,
        "pondering": Pondering,
        "asking": Asking,
        "counting": Counting,
    },
    identify=bearer_user,
    store=MemoryStore(),
    heartbeat_interval=0.2,
    run_burst=1000,
    routes=[
        Route("/test/release", release, methods=["POST"]),
        Route("/test/effects", effects, methods=["GET"]),
    ],
    a2a=A2A(security=Security.bearer("user name")),
)

# --- the client side -------------------------------------------------------------------


class Recorder(httpx.AsyncBaseTransport):
    """A real HTTP transport that keeps every response's headers and body as it streams
    through, for the leak check."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.seen: list[bytes] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        self.seen.append(json.dumps(dict(response.headers)).encode())
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=Tee(response.stream, self.seen),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()

    def text(self) -> str:
        return b"".join(self.seen).decode()


class Tee(httpx.AsyncByteStream):
    def __init__(self, stream: Any, sink: list[bytes]) -> None:
        self.stream = stream
        self.sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.sink.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


def http_client(user: str | None, transport: httpx.AsyncBaseTransport | None = None) -> Any:
    headers = {"authorization": f"Bearer {user}"} if user else {}
    return httpx.AsyncClient(headers=headers, timeout=20, transport=transport)


async def a2a_client(
    base_url: str, agent: str, http: httpx.AsyncClient, *, streaming: bool = True
) -> Client:
    """The official client, from the agent's card, as any A2A caller makes one."""
    factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming))
    return await factory.create_from_url(f"{base_url}/a2a/{agent}")


def user_message(
    text: str, *, context_id: str | None = None, task_id: str | None = None
) -> SendMessageRequest:
    message: Message = new_text_message(
        text, context_id=context_id, task_id=task_id, role=Role.ROLE_USER
    )
    return SendMessageRequest(message=message)


def as_json(event: StreamResponse | Task) -> dict[str, Any]:
    converted: dict[str, Any] = MessageToDict(event)
    return converted


async def collect(events: AsyncIterator[StreamResponse]) -> list[dict[str, Any]]:
    return [as_json(event) async for event in events]


def reply_of(task: dict[str, Any]) -> str:
    """The text of a task's reply artifact."""
    artifacts = task.get("artifacts", [])
    return "".join(part["text"] for a in artifacts for part in a["parts"] if "text" in part)


def streamed_reply(events: list[dict[str, Any]], start: str = "") -> str:
    """The reply an A2A client builds from a stream: the first task's artifact, then each
    artifact update appended to it (or replacing it, when `append` is false)."""
    text = start
    for event in events:
        if "task" in event:
            text = reply_of(event["task"])
        elif "artifactUpdate" in event:
            update = event["artifactUpdate"]
            chunk = "".join(part["text"] for part in update["artifact"]["parts"])
            text = text + chunk if update.get("append") else chunk
    return text


def states(events: list[dict[str, Any]]) -> list[str]:
    return [
        (event.get("task") or event["statusUpdate"])["status"]["state"]
        for event in events
        if "task" in event or "statusUpdate" in event
    ]
