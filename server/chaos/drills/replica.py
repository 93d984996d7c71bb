"""replica: a replica dies mid-run while another follows the run; the follower must be
told it ended, and the conversation must go on.

Two replicas on one Redis, leases of `LEASE_TTL` seconds, a slow agent. Each cycle
starts a run on A, follows it through B (`GET …/events` after the last seq A sent),
and SIGKILLs A once B is streaming. B's stream must end with `done`, stop reason
`interrupted`, within `BOUND` seconds (the lease, one heartbeat of silence after which
B asks whether the run still lives, and slack); the frames A and B sent together must
be one run without a gap before its `done`; and a send to the conversation through B
must then succeed at once.

tries: runs killed; survived: runs B ended as interrupted in time, after which the
conversation went on; lost: the others.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx2 as httpx

from chaos.client import TIMEOUT, follow, login, send, transcript
from chaos.drill import Setup
from chaos.drills.common import demo_replica
from chaos.outcome import DrillError, Outcome
from chaos.procs import Server
from chaos.redis_server import RedisServer
from chaos.streams import Streaming
from chaos.timing import wait_until

__all__ = ["drill"]

LEASE_TTL = 1.0
#: The demo's SSE heartbeat interval (create_app's default): a follower on another
#: replica looks at the run's lease after this long without a frame.
HEARTBEAT = 15.0
SLACK = 3.0
BOUND = LEASE_TTL + HEARTBEAT + SLACK
USER = "alice"


@dataclass(frozen=True)
class Plan:
    cycles: int
    delay: float = 0.2


QUICK = Plan(cycles=2)
FULL = Plan(cycles=5)


def one_cycle(
    a: Server,
    b: Server,
    clients: tuple[httpx.Client, httpx.Client],
    context_id: str | None,
    cycle: int,
    took: list[float],
) -> tuple[str | None, str | None]:
    """(the conversation, what went wrong or None)."""
    on_a, on_b = clients
    text = f"killed run {cycle}"
    runner = Streaming(lambda on: send(on_a, a.url, text, context_id, on_frame=on))
    runner.start()
    wait_until(lambda: len(runner.frames) >= 2, 20, "the run on A streaming")
    context_id = runner.context_id
    assert context_id is not None
    after = runner.frames[-1]["seq"]
    read = httpx.Timeout(BOUND + 10, connect=5.0)
    follower = Streaming(
        lambda on: follow(on_b, b.url, context_id, after, on_frame=on, timeout=read)
    )
    follower.start()
    wait_until(lambda: bool(follower.frames) or not follower.is_alive(), 20, "B following A's run")
    killed = time.monotonic()
    a.kill()
    runner.result(TIMEOUT.read or 10.0)
    followed = follower.result(BOUND + 15)
    if followed is None:
        return context_id, f"B's stream still open {BOUND + 15:.0f} s after A was killed"
    done = followed.done
    if done is None or done.get("stopReason") != "interrupted":
        return context_id, f"B's stream after A's death: {followed.describe()}"
    assert follower.done_at is not None
    took.append(follower.done_at - killed)
    if took[-1] > BOUND:
        return (
            context_id,
            f"B said interrupted {took[-1]:.1f} s after the kill (bound {BOUND:.0f} s)",
        )
    frames = {f["seq"]: f for f in runner.frames}
    for frame in followed.frames:
        if frames.setdefault(frame["seq"], frame) != frame:
            return context_id, f"A and B sent different frames as seq {frame['seq']}"
    # The done of a dead run is numbered past its seq lease: no seq a client saw is reused.
    seqs = sorted(frames)
    if seqs[:-1] != list(range(seqs[0], seqs[0] + len(seqs) - 1)) or frames[seqs[-1]] != done:
        return context_id, f"A's and B's frames together are not one run: {seqs}"
    after_death = send(on_b, b.url, f"after the kill {cycle}", context_id)
    if not after_death.acknowledged:
        return context_id, f"the next send through B: {after_death.describe()}"
    turns = transcript(on_b, b.url, context_id)["turns"]
    shape = [(t["role"], t["text"] if t["role"] == "user" else t["stopReason"]) for t in turns[-4:]]
    expected = [
        ("user", text),
        ("assistant", "interrupted"),
        ("user", after_death.text),
        ("assistant", "end"),
    ]
    if shape != expected:
        return context_id, f"the transcript ends {shape}"
    return context_id, None


def drill(setup: Setup, outcome: Outcome) -> None:
    plan = QUICK if setup.quick else FULL
    with RedisServer(setup.root, durable=False) as redis:
        redis.start()

        def replica(name: str) -> Server:
            return demo_replica(setup, redis, name, delay=plan.delay, lease_ttl=LEASE_TTL)

        took: list[float] = []
        context_id: str | None = None
        with (
            replica("a") as a,
            replica("b") as b,
            httpx.Client(timeout=TIMEOUT) as on_a,
            httpx.Client(timeout=TIMEOUT) as on_b,
        ):
            b.start()
            for cycle in range(plan.cycles):
                a.start()
                if not (login(on_a, a.url, USER) and login(on_b, b.url, USER)):
                    raise DrillError(f"cannot sign in as {USER}")
                outcome.tries += 1
                context_id, wrong = one_cycle(a, b, (on_a, on_b), context_id, cycle, took)
                if wrong is None:
                    outcome.survived += 1
                else:
                    outcome.lost += 1
                    outcome.fail(f"cycle {cycle}: {wrong}")
                setup.say(f"  replica: cycle {cycle + 1}/{plan.cycles}")
            if not b.alive():
                outcome.fail(f"replica b died:\n{b.log_tail(10)}")
        outcome.figure("to interrupted s (max)", max(took, default=0.0))
        outcome.figure("bound s", BOUND)
