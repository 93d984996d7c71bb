"""An app for tests against a real uvicorn process (`thinwire serve apps:app`).

Its agent holds every run open until the test calls `POST /test/release`, so tests can
act mid-run without sleeping.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from thinwire import Agent, Run, create_app

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


app = create_app({"gated": Gated}, heartbeat_interval=0.2)
app.router.routes.append(Route("/test/release", release, methods=["POST"]))
