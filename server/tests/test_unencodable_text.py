"""Text UTF-8 cannot carry (a lone surrogate), handed over by an agent, is refused where it
is handed over: the run fails as on any exception of the agent's, and what it said and
wrote before is saved — never a store's failure that loses the whole run."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel, Field
from starlette.testclient import TestClient

from conftest import app_for, send
from thinwire import Agent, Approval, Run, SQLiteStore

LONE = "a\ud800b"
TOKEN = "operator-token-for-tests"
AUTH = {"authorization": f"Bearer {TOKEN}"}


class Described(BaseModel):
    choice: str = Field(description=LONE)


async def nothing() -> None:
    return None


async def noted(run: Run) -> None:
    run.state["noted"] = LONE


HANDED_OVER: dict[str, tuple[Callable[[Run], Any], str]] = {
    "say": (lambda run: run.say(LONE), "the text given to run.say() is not valid Unicode"),
    "think": (lambda run: run.think(LONE), "the text given to run.think() is not valid Unicode"),
    "title": (lambda run: run.set_title(LONE), "a title is not valid Unicode"),
    "tool name": (lambda run: run.tool(LONE, nothing), "a tool's name is not valid Unicode"),
    "call_tool name": (
        lambda run: run.call_tool(LONE, nothing, {}),
        "a tool's name is not valid Unicode",
    ),
    "step name": (lambda run: run.step(LONE, nothing), "a step's name is not valid Unicode"),
    "interrupt prompt": (
        lambda run: run.interrupt(LONE, options=["yes"]),
        "an interrupt's prompt is not valid Unicode",
    ),
    "interrupt option": (
        lambda run: run.interrupt("Go?", options=["yes", LONE]),
        "an interrupt's options[1] is not valid Unicode",
    ),
    "interrupt schema": (
        lambda run: run.interrupt("Which?", schema=Described),
        "an interrupt's schema['properties']['choice']['description'] is not valid",
    ),
    "approval prompt": (
        lambda run: run.tool("refund", nothing, approval=Approval(LONE)),
        "an interrupt's prompt is not valid Unicode",
    ),
    "usage model": (
        lambda run: run.record_usage(LONE, 1, 1),
        "the model's name given to run.record_usage() is not valid Unicode",
    ),
    "handoff text": (
        lambda run: run.handoff("other", LONE),
        "the text given to run.handoff() is not valid Unicode",
    ),
    "state key": (lambda run: run.state.__setitem__(LONE, 1), "AgentState key 'a\\ud800b'"),
    "state key, several": (
        lambda run: run.state.update_all({"fine": 1, LONE: 2}),
        "AgentState key 'a\\ud800b'",
    ),
    "state value": (noted, "AgentState['noted'] is not valid Unicode"),
    "state source": (
        lambda run: run.state.set("k", 1, source=LONE),
        "source='a\\ud800b': a write's source is 1 to 64 of",
    ),
}


class HandsOver(Agent):
    """Says and writes something, then hands over the text of `case`."""

    case: ClassVar[str] = "say"

    async def run(self, run: Run, text: str) -> None:
        run.state["before"] = text
        await run.say("before ")
        handed = HANDED_OVER[type(self).case][0](run)
        if isinstance(handed, Awaitable):
            await handed
        await run.say("after")


class Other(Agent):
    async def run(self, run: Run, text: str) -> None:
        await run.say(text)


@pytest.mark.parametrize("case", HANDED_OVER)
def test_text_utf8_cannot_carry_is_refused_where_the_agent_hands_it_over(
    case: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    HandsOver.case = case
    complaint = HANDED_OVER[case][1]
    caplog.set_level(logging.ERROR, "thinwire")
    agents = {"demo": HandsOver, "other": Other}
    store = SQLiteStore(tmp_path / "thinwire.sqlite3")
    with TestClient(app_for(agents, store=store, operator_token=TOKEN)) as client:
        frames = send(client, "hi")
        error, done = frames[-2], frames[-1]
        assert error["code"] == "agent_error" and error["retryable"] is False, frames
        assert done["stopReason"] == "error" and done["text"] == "before "
        context_id = frames[0]["contextId"]
        admin = f"/admin/agents/demo/contexts/{context_id}"
        # What the run wrote before the bad call is saved, and readable.
        assert client.get(f"{admin}/state", headers=AUTH).json()["state"] == {"before": "hi"}
        audit = client.get(f"{admin}/audit", headers=AUTH)
        assert audit.status_code == 200
        assert [(e["key"], e["value"]) for e in audit.json()["entries"]] == [("before", "hi")]
        turns = client.get(f"/agents/demo/contexts/{context_id}").json()["turns"]
        assert [(t["text"], t["stopReason"]) for t in turns if t["role"] == "assistant"] == [
            ("before ", "error")
        ]
        # The conversation goes on.
        assert send(client, "again", context_id)[-1]["stopReason"] == "error"
    logged = "\n".join(str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    assert complaint in logged


class SaysPastTheChecks(Agent):
    """Text UTF-8 cannot carry, in every place a run keeps text, as if a check had missed
    it: what the save must still be able to write."""

    async def run(self, run: Run, text: str) -> None:
        run.state["count"] = 1
        await run.say("before ")
        await run.say(LONE)
        await run.think(LONE)
        run.set_title(LONE)
        run.record_usage(LONE, 1, 2, public=True)
        run.state["k"] = LONE
        await run.tool(LONE, nothing)  # its message in the history is refused: the run fails


def test_text_that_slipped_past_the_checks_cannot_lose_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: the run is saved with such text replaced (as its frames have
    it), and fails as the agent's mistake — not a store's, which would lose it all."""
    import thinwire.agent
    import thinwire.state

    monkeypatch.setattr(thinwire.agent, "is_unicode", lambda text: True)
    monkeypatch.setattr(thinwire.state, "check_json", lambda value, path: None)
    store = SQLiteStore(tmp_path / "thinwire.sqlite3")
    app = app_for({"demo": SaysPastTheChecks}, store=store, operator_token=TOKEN)
    with TestClient(app) as client:
        frames = send(client, "hi")
        error, done = frames[-2], frames[-1]
        assert error["code"] == "agent_error" and error["retryable"] is False, frames
        assert done["stopReason"] == "error" and done["text"] == "before a\ufffdb"
        context_id = frames[0]["contextId"]
        admin = f"/admin/agents/demo/contexts/{context_id}"
        state = client.get(f"{admin}/state", headers=AUTH).json()["state"]
        assert state == {"count": 1, "k": "a\ufffdb"}
        assert client.get(f"{admin}/audit", headers=AUTH).status_code == 200
        assert client.get(f"{admin}/usage", headers=AUTH).status_code == 200
        page = client.get(f"/agents/demo/contexts/{context_id}").json()
        [reply] = [t for t in page["turns"] if t["role"] == "assistant"]
        assert reply["text"] == "before a\ufffdb" and reply["stopReason"] == "error"
        assert page["title"] == "a\ufffdb"
