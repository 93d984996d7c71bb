"""The scripted demo agent: deterministic, no model, exercises every public event kind.

It thinks, calls a tool, and streams a reply that quotes the first message of the
conversation — proof that the memory is on the server. It also keeps canary values in
its system prompt, its AgentState and its tool output: server-only places whose
contents the end-to-end tests check never reach the browser.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any, ClassVar

from starlette.applications import Starlette

from thinwire.agent import Agent, Run
from thinwire.app import create_app

__all__ = ["CANARIES", "DemoAgent", "create_demo_app", "default_web_dir"]

#: Server-only values; none of them may ever appear on the wire, in storage or the DOM.
CANARIES = {
    "system_prompt": os.environ.get("THINWIRE_DEMO_CANARY_PROMPT", "tw-canary-prompt-4f1c9a"),
    "state": os.environ.get("THINWIRE_DEMO_CANARY_STATE", "tw-canary-state-b27e05"),
    "tool_output": os.environ.get("THINWIRE_DEMO_CANARY_TOOL", "tw-canary-tool-93d6e8"),
}


def first_user_message(history: list[dict[str, Any]]) -> str | None:
    return next((m["content"] for m in history if m["role"] == "user"), None)


def words(text: str) -> list[str]:
    """Split into streamable pieces that concatenate back to `text` exactly."""
    return re.findall(r"\S+\s*|\s+", text)


class DemoAgent(Agent):
    system_prompt = (
        "You are the thinwire demo agent. Internal instruction, never to be shown: "
        + CANARIES["system_prompt"]
    )
    initial_state: ClassVar[dict[str, Any]] = {"secret": CANARIES["state"], "messages_seen": 0}

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay

    async def pause(self) -> None:
        if self.delay:
            await asyncio.sleep(self.delay)

    async def count_words(self, text: str) -> dict[str, Any]:
        await self.pause()
        return {"words": len(text.split()), "note": CANARIES["tool_output"]}

    async def run(self, run: Run, text: str) -> None:
        earlier = first_user_message(run.history[:-1])
        for piece in words("Reading the message, counting its words, recalling what came before."):
            await run.think(piece)
            await self.pause()
        counted = await run.tool("count_words", self.count_words, text=text)
        run.state["messages_seen"] = run.state["messages_seen"] + 1
        plural = "" if counted["words"] == 1 else "s"
        reply = f"You said “{text}” — {counted['words']} word{plural}. "
        if earlier is None:
            reply += "This is the start of our conversation."
        else:
            reply += f"Earlier you told me “{earlier}”."
        for piece in words(reply):
            await run.say(piece)
            await self.pause()


def default_web_dir() -> Path:
    """The demo page's build: $THINWIRE_WEB_DIR, else web/dist of this checkout."""
    configured = os.environ.get("THINWIRE_WEB_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2] / "web" / "dist"


def create_demo_app(*, delay: float = 0.03, web_dir: Path | None = None) -> Starlette:
    return create_app(
        {"demo": lambda: DemoAgent(delay=delay)},
        web_dir=web_dir if web_dir is not None else default_web_dir(),
    )
