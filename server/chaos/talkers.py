"""Clients that keep talking: each sends message after message to its own conversation
while its gate is open, and writes down every exchange.

The drill closes the gate while it takes the server away and opens it once the server
is back; a send that fails waits `backoff` seconds before the next (a polite client's
retry delay, not a wait for anything to settle).
"""

from __future__ import annotations

import threading
import time

import httpx2 as httpx

from chaos.client import TIMEOUT, Exchange, login, send
from chaos.conversation import Conversation

__all__ = ["Talker", "talking"]


class Talker(threading.Thread):
    def __init__(
        self,
        name: str,
        user: str,
        url: str,
        gate: threading.Event,
        *,
        backoff: float = 0.2,
    ) -> None:
        super().__init__(name=f"chaos-talker-{name}", daemon=True)
        self.label = name
        self.user = user
        self.url = url
        self.gate = gate
        self.backoff = backoff
        self.halt = threading.Event()
        self.conversation = Conversation(user)
        self.error: BaseException | None = None
        self.sends = 0
        #: Frames received so far, counted as they arrive (a clock the drill can kill by).
        self.frames = 0

    @property
    def exchanges(self) -> list[Exchange]:
        return self.conversation.exchanges

    def sends_since(self, moment: float) -> int:
        return sum(1 for e in list(self.exchanges) if e.started >= moment)

    def acknowledged_since(self, moment: float) -> int:
        return sum(1 for e in list(self.exchanges) if e.started >= moment and e.acknowledged)

    def run(self) -> None:
        try:
            with httpx.Client(timeout=TIMEOUT) as client:
                signed_in = False
                while not self.halt.is_set():
                    if not self.gate.wait(0.1):
                        continue
                    if not signed_in:
                        signed_in = login(client, self.url, self.user)
                        if not signed_in:
                            self.halt.wait(self.backoff)
                            continue
                    self.sends += 1
                    text = f"{self.label} message {self.sends}"
                    result = send(
                        client, self.url, text, self.conversation.context_id, on_frame=self._seen
                    )
                    self.conversation.record(result)
                    if not result.acknowledged:
                        self.halt.wait(self.backoff)
        except BaseException as exc:  # reported by the drill, not lost in a thread
            self.error = exc

    def _seen(self, frame: object) -> None:
        self.frames += 1

    def finish(self, timeout: float = 20.0) -> None:
        """Stop after the send in flight; the drill reports a talker that does not."""
        self.halt.set()
        self.join(timeout)


def talking(talkers: list[Talker]) -> float:
    """Start them all; the moment they started."""
    moment = time.monotonic()
    for talker in talkers:
        talker.start()
    return moment
