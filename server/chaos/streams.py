"""A send or a follow on a thread of its own, watched as its frames arrive, so a drill
can act at a moment of the stream (kill the server after the third frame) and read the
whole exchange afterwards."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from chaos.client import Exchange, Frame, OnFrame

__all__ = ["Streaming"]


class Streaming(threading.Thread):
    def __init__(self, call: Callable[[OnFrame], Exchange]) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.frames: list[Frame] = []
        self.counts: Counter[str] = Counter()
        self.done_at: float | None = None
        self.exchange: Exchange | None = None

    def seen(self, frame: Frame) -> None:
        self.frames.append(frame)
        self.counts[str(frame.get("type"))] += 1
        if frame.get("type") == "done":
            self.done_at = time.monotonic()

    def run(self) -> None:
        self.exchange = self.call(self.seen)

    @property
    def context_id(self) -> str | None:
        start = next((f for f in self.frames if f.get("type") == "run_start"), None)
        return None if start is None else str(start["contextId"])

    def result(self, timeout: float) -> Exchange | None:
        """The exchange once it ended, or None if it is still going after `timeout`."""
        self.join(timeout)
        return None if self.is_alive() else self.exchange
