"""A FastAPI app of your own, with thinwire's agents mounted under /api and the built
page (web/: `npm run build`) at /. Serve it with `thinwire serve main:app`."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from fastapi.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from thinwire import Agent, Run, anonymous, create_app, mount


class Echo(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.think("Reading it back. ")
        for word in re.findall(r"\S+\s*", f"You said: {text}"):
            await run.say(word)
            await asyncio.sleep(0.03)  # stands in for a model's streaming


app = FastAPI(title="My app")


@app.get("/hello")
async def hello() -> dict[str, str]:
    """One of the app's own routes, served as before."""
    return {"hello": "world"}


# The agents at /api/agents/…; mount() also runs thinwire's startup and shutdown with the
# app's. anonymous: everyone is one user; a real app passes its own `identify`.
mount(app, "/api", create_app({"echo": Echo}, identify=anonymous))


class BuiltPage(StaticFiles):
    """The page's build; until `npm run build` makes it, a 503 saying so. Checked on each
    request, so a build made while the server runs is served without a restart."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.directory is None or not Path(self.directory).is_dir():
            notice = "The page is not built yet: cd web && npm run build"
            await PlainTextResponse(notice, status_code=503)(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


# Last, so that it takes only what the routes above did not: the page.
page = Path(__file__).parent / "web" / "dist"
app.mount("/", BuiltPage(directory=page, html=True, check_dir=False), name="page")
