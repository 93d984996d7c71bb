"""What the tests of the protocol faces (the AI SDK's stream, AG-UI) share: an agent that
thinks, says five words, waits at a gate the test opens and says five more, identity by
an `x-user` header, and the app with the demo agent (its ledger in `tmp_path`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from starlette.requests import HTTPConnection
from starlette.testclient import TestClient

from conftest import app_for
from thinwire import Agent, Run
from thinwire.demo import DemoAgent

ADA = {"x-user": "ada"}
EVE = {"x-user": "eve"}
#: What the demo agent quotes when a conversation has no earlier message.
START_OF_CONVERSATION = "This is the start of our conversation."


class Paced(Agent):
    """Thinks, says five words, waits at a gate, then (its side effect) says five more."""

    gate: ClassVar[asyncio.Event] = asyncio.Event()
    effects: ClassVar[list[str]] = []

    async def run(self, run: Run, text: str) -> None:
        await run.think("Thinking it over.")
        for n in range(5):
            await run.say(f"a{n} ")
        await type(self).gate.wait()
        type(self).effects.append(text)
        for n in range(5):
            await run.say(f"b{n} ")


def by_header(connection: HTTPConnection) -> str | None:
    return connection.headers.get("x-user")


@contextlib.contextmanager
def face_client(tmp_path: Path, **agents: type[Agent]) -> Iterator[TestClient]:
    """A client (as Ada) of an app serving `demo`, `paced` and `agents`, the gate shut."""
    Paced.gate = asyncio.Event()
    Paced.effects = []
    served = {"demo": lambda: DemoAgent(ledger=tmp_path / "ledger"), "paced": Paced, **agents}
    app = app_for(served, identify=by_header, heartbeat_interval=None)
    with TestClient(app, headers=ADA) as client:
        yield client


def open_gate(client: TestClient) -> None:
    assert client.portal is not None
    client.portal.call(Paced.gate.set)
