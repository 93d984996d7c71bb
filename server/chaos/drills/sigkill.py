"""sigkill: concurrent conversations against one server on SQLite, SIGKILLed at random
moments and started again on the same data, cycle after cycle.

Four clients (four demo users) each send message after message to a conversation of
their own. A cycle kills the server once a random number of frames (across all clients)
has arrived since it came back, so the kill lands anywhere: mid-stream, mid-save,
between runs. After every kill `PRAGMA integrity_check` runs on a copy of the file as
the kill left it; after the last one each client must be able to go on, and then every
turn acknowledged with `done`/`end` must be in its transcript exactly once, in order.

tries: sends; survived: acknowledged and kept; lost: acknowledged and not kept.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from chaos.drill import SECRET, Setup
from chaos.drills.common import check_conversations, count_server_errors, tally
from chaos.outcome import Outcome
from chaos.procs import Server
from chaos.sqlite_check import integrity
from chaos.talkers import Talker, talking
from chaos.timing import wait_until

__all__ = ["drill"]

USERS = ("alice", "bob", "carol", "guest")


@dataclass(frozen=True)
class Plan:
    cycles: int
    #: Seconds between the demo agent's streamed pieces: a run is ~30 of them.
    delay: float = 0.01
    #: A kill comes after 1..most frames since the restart (~300 frames a second).
    most: int = 200


QUICK = Plan(cycles=3)
FULL = Plan(cycles=20, most=400)


def kill_at_random_frame(
    server: Server, talkers: list[Talker], gate: threading.Event, setup: Setup, most: int
) -> None:
    """SIGKILL once 1..`most` more frames have reached the clients; the gate closes first,
    so no new send starts against the dead server."""
    due = sum(t.frames for t in talkers) + setup.rng.randint(1, most)
    wait_until(lambda: sum(t.frames for t in talkers) >= due, 30, "frames to flow")
    gate.clear()
    server.kill()


def drill(setup: Setup, outcome: Outcome) -> None:
    plan = QUICK if setup.quick else FULL
    data = setup.root / "data"
    database = data / "thinwire.sqlite3"
    args = ["demo", "--delay", str(plan.delay), "--data-dir", str(data)]
    gate = threading.Event()
    with Server("demo", args, root=setup.root, env={"THINWIRE_DEMO_SECRET": SECRET}) as server:
        server.start()
        talkers = [Talker(f"c{i}", user, server.url, gate) for i, user in enumerate(USERS)]
        gate.set()
        talking(talkers)
        checks: list[str] = []
        try:
            for cycle in range(plan.cycles):
                kill_at_random_frame(server, talkers, gate, setup, plan.most)
                checks.append(integrity(database))
                if checks[-1] != "ok":
                    outcome.fail(f"cycle {cycle}: integrity_check after SIGKILL: {checks[-1]}")
                server.start()
                gate.set()
                setup.say(f"  sigkill: cycle {cycle + 1}/{plan.cycles}")
            # Every conversation must go on after the last restart.
            back = time.monotonic()
            wait_until(
                lambda: all(t.acknowledged_since(back) for t in talkers),
                30,
                "every client acknowledged again after the last restart",
            )
        finally:
            for talker in talkers:
                talker.finish()
        for talker in talkers:
            if talker.error is not None:
                outcome.fail(f"{talker.label}: {type(talker.error).__name__}: {talker.error}")
            if talker.is_alive():
                outcome.fail(f"{talker.label}: still sending 20 s after being told to stop")
        exchanges = [e for t in talkers for e in t.exchanges]
        outcome.tries = len(exchanges)
        outcome.figure("kills", plan.cycles)
        outcome.figure("acked", sum(e.acknowledged for e in exchanges))
        outcome.figure("outcomes", tally(exchanges))
        outcome.figure("5xx", count_server_errors(exchanges, outcome, "sigkill"))
        hangs = [e for e in exchanges if e.kind == "timeout"]
        if hangs:
            outcome.fail(f"{len(hangs)} sends hung; first: {hangs[0].describe()}")
        check_conversations(server.url, [t.conversation for t in talkers], outcome)
    final = integrity(database)
    if final != "ok":
        outcome.fail(f"integrity_check at the end: {final}")
    outcome.figure("integrity", "ok" if final == "ok" and set(checks) <= {"ok"} else "FAILED")
