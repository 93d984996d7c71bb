"""Running an agent: the run log (the frames of one run) and the task that fills it.

The run executes in its own task, not in the HTTP response: a client that disconnects
does not stop the run, and any number of readers can follow the same log.

Persistence happens at the two edges of a run. `begin_run` saves the user's message and
marks the run active before the first frame is sent; `execute` saves the reply, the tool
records and the AgentState writes (with their audit) in one atomic save, and only then
sends `done`. A process killed in between leaves the marked run, which the registry
records as interrupted on next load: completed turns intact, nothing half-written.
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
from thinwire.contexts import SEQ_LEASE, Context, ContextRegistry
from thinwire.ids import new_run_id

__all__ = ["RunLog", "RunTooLong", "begin_run", "execute"]

logger = logging.getLogger("thinwire.runs")

#: Frames kept back at the end of a seq lease for the run's `error` and `done`.
CLOSING_FRAMES = 3


class RunTooLong(RuntimeError):
    """A run emitted more frames than one seq lease allows."""


class RunLog:
    """Every frame of one run, in order, as encoded JSON; followers wait for more."""

    def __init__(self, context: Context, run_id: str, seq_lease: int) -> None:
        self.context = context
        self.run_id = run_id
        self.seq_lease = seq_lease
        self.frames: list[tuple[int, str]] = []
        self.finished = False
        self._changed = asyncio.Event()
        self._calls = 0

    def new_call_id(self) -> str:
        self._calls += 1
        return f"call-{self._calls}"

    def reserve_seq(self) -> int:
        self.context.record.last_seq += 1
        return self.context.record.last_seq

    def _append(self, model: type[BaseModel], seq: int | None = None, **fields: Any) -> None:
        if seq is None:
            closing = model in (wire.ErrorFrame, wire.DoneFrame)
            if not closing and self.context.record.last_seq >= self.seq_lease - CLOSING_FRAMES:
                raise RunTooLong(f"a run may send at most {SEQ_LEASE - CLOSING_FRAMES} frames")
            seq = self.reserve_seq()
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

    def done(
        self,
        text: str,
        tool_calls: list[str],
        stop_reason: wire.StopReason,
        seq: int | None = None,
    ) -> None:
        self._append(wire.DoneFrame, seq, text=text, tool_calls=tool_calls, stop_reason=stop_reason)
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


async def begin_run(
    registry: ContextRegistry, context: Context, text: str, run_id: str | None = None
) -> RunLog:
    """Hold the context and durably record the user's message; `context_busy` if held."""
    run_id = run_id or new_run_id()
    registry.acquire(context, "run")
    try:
        record = context.record
        lease = record.last_seq + SEQ_LEASE
        record.history.append({"role": "user", "content": text})
        record.transcript.append(
            {"role": "user", "text": text, "toolCalls": [], "stopReason": None}
        )
        record.active_run = {"runId": run_id, "seqLease": lease}
        await registry.save(context)
    except BaseException:
        registry.release(context)
        raise
    log = context.run = RunLog(context, run_id, lease)
    return log


def failure(log: RunLog, code: str, what: str) -> None:
    """Log the exception under a reference and send the client only the reference."""
    reference = "err-" + secrets.token_hex(6)
    logger.exception("%s in %s (%s)", what, log.context.id, reference)
    log.error(code, f"{what}. Reference: {reference}.", retryable=code == "store_error")


async def execute(registry: ContextRegistry, context: Context, log: RunLog, text: str) -> None:
    """Run the context's agent on `text`; always end the log with a `done` frame."""

    async def handoff(agent_name: str, run: Run, text: str) -> None:
        factory = registry.agents.get(agent_name)
        if factory is None:
            raise LookupError(f"no agent named {agent_name!r} to hand off to")
        await factory().run(run.handed_to(), text)

    run = Run(
        context_id=context.id,
        run_id=log.run_id,
        history=context.history,
        state=context.state,
        log=log,
        handoff=handoff,
    )
    stop_reason: wire.StopReason = "end"
    try:
        log.run_start(context.agent_name)
        await context.agent.run(run, text)
    except asyncio.CancelledError:
        stop_reason = "interrupted"
        raise
    except RunTooLong:
        failure(log, "run_too_long", "The run sent too many frames")
        stop_reason = "error"
    except Exception:
        # The exception text may hold anything private; it stays in the server log.
        failure(log, "agent_error", "The agent failed")
        stop_reason = "error"
    finally:
        await finish(registry, context, log, run, stop_reason)


async def finish(
    registry: ContextRegistry,
    context: Context,
    log: RunLog,
    run: Run,
    stop_reason: wire.StopReason,
) -> None:
    record = context.record
    record.history.append({"role": "assistant", "content": run.text, "stopReason": stop_reason})
    if run.text or run.tool_calls or stop_reason != "end":
        record.transcript.append(
            {
                "role": "assistant",
                "text": run.text,
                "toolCalls": run.tool_calls,
                "stopReason": stop_reason,
            }
        )
    record.active_run = None
    done_seq = log.reserve_seq()
    try:
        await registry.save(context)
    except Exception:
        # Nothing of this run landed; the stored run stays marked and is recorded as
        # interrupted when the context is next loaded.
        failure(log, "store_error", "The reply could not be saved")
        log.done(run.text, run.tool_calls, "error")
    else:
        log.done(run.text, run.tool_calls, stop_reason, seq=done_seq)
    finally:
        context.run = None
        registry.release(context)
