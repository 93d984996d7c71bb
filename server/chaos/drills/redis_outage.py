"""redis: two replicas on one Redis, and Redis killed while sends run.

Redis keeps an append-only file fsynced on every write, so whatever it acknowledged
comes back when it restarts on the same port. Two clients per replica send message
after message to conversations of their own. Each outage SIGKILLs redis-server at a
random frame, lets every client try a few sends against the dead store, and starts it
again. Checked:

- while Redis is down, and until a replica is back on its feet, every refusal is typed:
  `503 store_unavailable` (or, for a run already streaming, an `error` frame
  `store_error` and a `done` `interrupted`, the reply as the store kept it); never a
  500, an untyped body, a cut stream, a hang;
- after Redis is back, every conversation on both replicas gets a send acknowledged
  within `RECOVERY` seconds, with no replica restarted;
- at the end every acknowledged turn is in its transcript exactly once, in order.

tries: sends; survived: acknowledged and kept; lost: acknowledged and not kept.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from chaos.client import Exchange
from chaos.drill import Setup
from chaos.drills.common import check_conversations, count_server_errors, demo_replica, tally
from chaos.outcome import DrillError, Outcome
from chaos.procs import Server
from chaos.redis_server import RedisServer
from chaos.talkers import Talker, talking
from chaos.timing import wait_until

__all__ = ["drill"]

LEASE_TTL = 2.0
#: Seconds from Redis answering again to a send acknowledged in every conversation.
RECOVERY = 10.0
REPLICA_USERS = {"a": ("alice", "carol"), "b": ("bob", "guest")}
#: Ways to refuse that a client can act on.
TYPED_IN_STREAM = {"store_error", "store_unavailable"}


@dataclass(frozen=True)
class Plan:
    outages: int
    #: Sends each client tries while Redis is down.
    while_down: int
    delay: float = 0.01
    most_frames: int = 120  # the kill comes after 1..most frames


QUICK = Plan(outages=1, while_down=3)
FULL = Plan(outages=3, while_down=6)


def typed(exchange: Exchange) -> bool:
    """A refusal a client can act on: the typed 503, a typed 409/429, or a streaming
    run ended by an `error` frame about the store (its reply, which the store refused,
    ends as the store keeps it: `interrupted`)."""
    if exchange.status == 503:
        return exchange.code == "store_unavailable"
    if exchange.status in (409, 429):
        return exchange.code is not None
    error = exchange.error_frame
    done = exchange.done
    if exchange.status != 200 or done is None or error is None:
        return False
    code = error.get("code")
    ends = "interrupted" if code == "store_error" else "error"
    return code in TYPED_IN_STREAM and done.get("stopReason") == ends


def outage(
    redis: RedisServer, talkers: list[Talker], setup: Setup, plan: Plan, outcome: Outcome
) -> list[float]:
    """Kill Redis at a random frame, let every client try while it is down, start it
    again; the seconds each conversation took to be acknowledged again."""
    moment = time.monotonic()
    wait_until(
        lambda: all(t.acknowledged_since(moment) for t in talkers),
        30,
        "every client acknowledged with Redis up",
    )
    due = sum(t.frames for t in talkers) + setup.rng.randint(1, plan.most_frames)
    wait_until(lambda: sum(t.frames for t in talkers) >= due, 30, "frames to flow")
    down = time.monotonic()
    redis.kill()
    wait_until(
        lambda: all(t.sends_since(down) >= plan.while_down for t in talkers),
        60,
        "sends tried while Redis is down",
    )
    redis.start()
    back = time.monotonic()
    try:
        wait_until(
            lambda: all(t.acknowledged_since(back) for t in talkers),
            RECOVERY,
            "every conversation acknowledged after Redis came back",
        )
    except DrillError as exc:
        stuck = [t for t in talkers if not t.acknowledged_since(back)] or talkers
        last = stuck[0].exchanges[-1].describe() if stuck[0].exchanges else "-"
        outcome.fail(f"{exc}: not {[t.label for t in stuck]}; {stuck[0].label}'s last: {last}")
    recoveries = []
    for talker in talkers:
        acked = [e.ended for e in list(talker.exchanges) if e.started >= back and e.acknowledged]
        if acked:
            recoveries.append(min(acked) - back)
    return recoveries


def drill(setup: Setup, outcome: Outcome) -> None:
    plan = QUICK if setup.quick else FULL
    with RedisServer(setup.root, durable=True) as redis:
        redis.start()

        def replica(name: str) -> Server:
            return demo_replica(setup, redis, name, delay=plan.delay, lease_ttl=LEASE_TTL)

        gate = threading.Event()
        gate.set()
        with replica("a") as a, replica("b") as b:
            a.start()
            b.start()
            servers = {"a": a, "b": b}
            talkers = [
                Talker(f"{name}-{user}", user, servers[name].url, gate, backoff=0.5)
                for name, users in REPLICA_USERS.items()
                for user in users
            ]
            talking(talkers)
            recoveries: list[float] = []
            try:
                for number in range(plan.outages):
                    recoveries += outage(redis, talkers, setup, plan, outcome)
                    setup.say(f"  redis: outage {number + 1}/{plan.outages}")
            finally:
                for talker in talkers:
                    talker.finish()
            for server in servers.values():
                if not server.alive():
                    outcome.fail(f"replica {server.name} died:\n{server.log_tail(10)}")
            exchanges = [e for t in talkers for e in t.exchanges]
            refusals = [e for e in exchanges if not e.acknowledged]
            untyped = [e for e in refusals if not typed(e)]
            if untyped:
                outcome.fail(f"{len(untyped)} refusals not typed; first: {untyped[0].describe()}")
            with_retry = sum(1 for e in refusals if e.status == 503 and e.retry_after is not None)
            outcome.tries = len(exchanges)
            outcome.figure("refusals", tally(refusals))
            outcome.figure(
                "503 w/ Retry-After", f"{with_retry}/{sum(e.status == 503 for e in refusals)}"
            )
            outcome.figure("recovery s (max)", max(recoveries, default=0.0))
            outcome.figure("5xx", count_server_errors(exchanges, outcome, "redis"))
            check_conversations(a.url, [t.conversation for t in talkers], outcome)
