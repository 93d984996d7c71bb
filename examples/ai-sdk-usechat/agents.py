"""The app's agent. `thinwire serve agents:app` serves it, to `useChat` at
/ai-sdk/assistant/chat, and the built page (`npm run build` writes dist/) at /."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any, ClassVar

from thinwire import Agent, Approval, Rejected, Run, anonymous, create_app


class Assistant(Agent):
    # Server-only, like everything the agent keeps: the page never sees any of it.
    system_prompt = "You help with orders. Internal: refunds over $100 need a manager."
    initial_state: ClassVar[Mapping[str, Any]] = {"tier": "gold, internal score 87"}
    #: Seconds between words, as a model streams its reply.
    pace = 0.1

    async def lookup_order(self, order: str, warehouse_key: str) -> dict[str, Any]:
        return {"order": order, "status": "delivered", "total": 40, "shelf": "B7-internal"}

    async def issue_refund(self, order: str, amount: int) -> str:
        return f"refund of ${amount} queued for order {order}"

    async def stream(self, run: Run, text: str) -> None:
        """Say `text` a word at a time."""
        for word in re.findall(r"\S+\s*", text):
            await run.say(word)
            await asyncio.sleep(self.pace)

    async def run(self, run: Run, text: str) -> None:
        await run.think("Looking up the order first. ")
        order = await run.tool(
            "lookup_order", self.lookup_order, order="1234", warehouse_key="wk-5531-internal"
        )
        await self.stream(run, f"Order {order['order']} was {order['status']}: ${order['total']}. ")
        if "refund" not in text.lower():
            await self.stream(
                run,
                "It left our warehouse on Monday, travelled with the usual carrier and was "
                "signed for at your door on Wednesday afternoon. Ask me for a refund if "
                "something is wrong with it.",
            )
            return
        # The run waits here, on the server, until someone answers on the page.
        approval = Approval(f"Refund ${order['total']} on order {order['order']}?")
        try:
            await run.tool(
                "issue_refund",
                self.issue_refund,
                approval=approval,
                order=order["order"],
                amount=order["total"],
            )
        except Rejected:
            await self.stream(run, "Okay, no refund.")
            return
        await self.stream(run, f"Done: ${order['total']} is on its way back.")


# anonymous: every visitor is the same user, fine on your own machine. A real app says
# who is asking with its own `identify` (see "Who is asking" in thinwire's docs/server.md).
app = create_app({"assistant": Assistant}, identify=anonymous, web_dir="dist")
