"""Apps for tests against a real uvicorn process (`thinwire serve apps:app`).

The gated agent holds every run open until the test calls `POST /test/release`, so tests
can act mid-run without sleeping. `durable` keeps everything in SQLite under
$THINWIRE_DATA_DIR, for tests that kill and restart the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from thinwire import Agent, MemoryStore, Run, SQLiteStore, anonymous, create_app
from thinwire.app import default_data_dir
from thinwire.demo import DemoAgent

gate = asyncio.Event()


class Gated(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say("before the gate. ")
        await gate.wait()
        gate.clear()
        await run.say("after the gate.")


async def release(request: Request) -> Response:
    gate.set()
    return JSONResponse({"released": True})


RELEASE = Route("/test/release", release, methods=["POST"])

app = create_app(
    {"gated": Gated},
    identify=anonymous,
    store=MemoryStore(),
    heartbeat_interval=0.2,
    routes=[RELEASE],
)


#: The gated agent, with the operator API on (`operator_token`), for its metrics.
metered = create_app(
    {"gated": Gated},
    identify=anonymous,
    store=MemoryStore(),
    operator_token="operator-token-for-tests",
    routes=[RELEASE],
)


class Stubborn(Agent):
    """Swallows every cancellation: it ends only when released (`POST /test/release`)."""

    async def run(self, run: Run, text: str) -> None:
        await run.say("holding on. ")
        while not gate.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await gate.wait()


#: A run that holds shutdown: its agent ignores its cancellation.
stubborn = create_app(
    {"stubborn": Stubborn}, identify=anonymous, store=MemoryStore(), routes=[RELEASE]
)


class Flood(Agent):
    """Streams 16 MB as fast as it can."""

    async def run(self, run: Run, text: str) -> None:
        for n in range(4000):
            await run.say(f"{n:08d}" + "x" * 4088)


#: A server that drops clients which take no frame for 0.3 s; two streams a user, so one
#: stalled socket (itself and the run it follows) holds them all until it is dropped.
impatient = create_app(
    {"flood": Flood}, identify=anonymous, store=MemoryStore(), send_timeout=0.3, max_streams=2
)


def durable() -> Starlette:
    return create_app(
        {"gated": Gated, "demo": DemoAgent},
        identify=anonymous,
        store=SQLiteStore.in_directory(default_data_dir()),
        operator_token=os.environ["THINWIRE_OPERATOR_TOKEN"],
        routes=[RELEASE],
    )


#: The demo agent (no delays) with everything switched on, for schemathesis to attack.
fuzz = create_app(
    {"demo": DemoAgent, "other": DemoAgent},
    identify=anonymous,
    store=MemoryStore(),
    operator_token="schemathesis-operator-token",
    run_burst=100_000,
)
