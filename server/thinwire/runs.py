"""Running an agent: the run log (the frames of one run) and the task that fills it.

The run executes in its own task, not in the HTTP response: a client that disconnects
does not stop the run, and any number of readers can follow the same log.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from typing import Any

from pydantic import BaseModel

from thinwire import wire
from thinwire.agent import Run
from thinwire.contexts import Context

__all__ = ["RunLog", "execute"]

logger = logging.getLogger("thinwire.runs")


class RunLog:
    """Every frame of one run, in order, as encoded JSON; followers wait for more."""

    def __init__(self, context: Context, run_id: str) -> None:
        self.context = context
        self.run_id = run_id
        self.frames: list[tuple[int, str]] = []
        self.finished = False
        self._changed = asyncio.Event()

    def _append(self, model: type[BaseModel], **fields: Any) -> None:
        self.context.last_seq += 1
        seq = self.context.last_seq
        frame = model(context_id=self.context.id, run_id=self.run_id, seq=seq, **fields)
        self.frames.append((seq, frame.model_dump_json(by_alias=True)))
        self._changed.set()
        self._changed = asyncio.Event()

    def run_start(self, agent: str) -> None:
        self._append(wire.RunStartFrame, agent=agent)

    def thinking(self, delta: str) -> None:
        self._append(wire.ThinkingFrame, delta=delta)

    def token(self, delta: str) -> None:
        self._append(wire.TokenFrame, delta=delta)

    def tool_call(self, call_id: str, name: str) -> None:
        self._append(wire.ToolCallFrame, call_id=call_id, name=name)

    def tool_result(self, call_id: str, name: str, *, ok: bool) -> None:
        self._append(wire.ToolResultFrame, call_id=call_id, name=name, ok=ok)

    def error(self, code: str, message: str, *, retryable: bool) -> None:
        self._append(wire.ErrorFrame, code=code, message=message, retryable=retryable)

    def done(self, text: str, tool_calls: list[str], stop_reason: wire.StopReason) -> None:
        self._append(wire.DoneFrame, text=text, tool_calls=tool_calls, stop_reason=stop_reason)
        self.finished = True

    async def follow(
        self, after: int = 0, heartbeat: float | None = None
    ) -> AsyncIterator[tuple[int, str] | None]:
        """Yield `(seq, json)` for every frame with seq > `after` until the run is done.

        Yields None when `heartbeat` seconds pass without a frame.
        """
        index = 0
        while True:
            changed = self._changed
            while index < len(self.frames):
                seq, data = self.frames[index]
                index += 1
                if seq > after:
                    yield seq, data
            if self.finished:
                return
            try:
                await asyncio.wait_for(changed.wait(), heartbeat)
            except TimeoutError:
                yield None


async def execute(context: Context, log: RunLog, text: str) -> None:
    """Run the context's agent on `text`, always ending the log with a `done` frame."""
    run = Run(
        context_id=context.id,
        run_id=log.run_id,
        history=context.history,
        state=context.state,
        log=log,
    )
    context.history.append({"role": "user", "content": text})
    context.transcript.append(wire.TranscriptTurn(role="user", text=text, tool_calls=[]))
    log.run_start(context.agent_name)
    stop_reason: wire.StopReason = "end"
    try:
        await context.agent.run(run, text)
    except asyncio.CancelledError:
        stop_reason = "stopped"
        raise
    except Exception:
        # The exception text may hold anything private; it stays in the server log.
        error_id = "err-" + secrets.token_hex(6)
        logger.exception("agent %r failed in %s (%s)", context.agent_name, context.id, error_id)
        log.error("agent_error", f"The agent failed. Reference: {error_id}.", retryable=False)
        stop_reason = "error"
    finally:
        context.history.append({"role": "assistant", "content": run.text})
        if run.text or run.tool_calls:
            context.transcript.append(
                wire.TranscriptTurn(role="assistant", text=run.text, tool_calls=run.tool_calls)
            )
        log.done(run.text, run.tool_calls, stop_reason)
        context.run = None
