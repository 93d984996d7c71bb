"""floods: hostile connections against one server while another user goes on sending.

(a) connections that send a request's headers a byte every few seconds, and connections
that send nothing at all; (b) one principal (alice) opening hundreds of SSE followers of
its own quiet, slow run. Meanwhile bob — the bystander — sends message after message,
each on a new connection, for as long as the flood lasts. Checked: each of bob's sends
completes (`done`, stop reason `end`) within `WITHIN` seconds; a follower the server
refuses is refused with a typed 429 (`too_many_streams`), never a 5xx or a dropped
connection; the server is still alive at the end.

tries: bob's sends during the flood; survived: completed within `WITHIN` s; lost: the
rest. Reported beside them: bob's p50/p99 send latency (and before the flood), how many
flood connections the server closed, how many followers it accepted and refused.
"""

from __future__ import annotations

import asyncio
import resource
import time
from dataclasses import dataclass

import httpx2 as httpx

from chaos.client import TIMEOUT, Exchange, login, send
from chaos.drill import SECRET, Setup
from chaos.flood_sockets import Connection, close_all, open_many, status_of
from chaos.outcome import DrillError, Outcome
from chaos.procs import Server
from chaos.streams import Streaming
from chaos.timing import percentile, wait_until

__all__ = ["drill"]

#: A bystander's send must complete within this many seconds.
WITHIN = 5.0
#: The flood server's header timeout: slow and silent connections must be gone by then.
HEADER_TIMEOUT = 2.0
#: Open streams per principal (create_app's default).
STREAM_CAP = 32
COOKIE = "thinwire_demo_user"
#: Seconds between the starts of two of bob's sends: within the demo's rate limit (two
#: runs a second per principal after a burst of thirty), so that a 429 means the flood.
PACE = 0.6


@dataclass(frozen=True)
class Plan:
    slow: int  # connections sending headers a byte at a time
    silent: int  # connections sending nothing
    followers: int  # alice's SSE followers
    sends: int  # bob's sends, at least
    drip: float  # seconds between two bytes of a slow connection
    hold: float  # seconds the flood lasts, at least


QUICK = Plan(slow=300, silent=60, followers=150, sends=10, drip=2.0, hold=6.0)
FULL = Plan(slow=1000, silent=200, followers=400, sends=40, drip=3.0, hold=30.0)


def raise_file_limit(needed: int) -> int:
    """Raise this process's soft limit on open files towards `needed` (the server, a
    child, inherits it); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        soft = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return soft


def bystander(url: str, plan: Plan, until: float) -> list[Exchange]:
    """bob's sends, one conversation, a new connection each, paced, until the flood ends."""
    sends: list[Exchange] = []
    no_reuse = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(timeout=TIMEOUT, limits=no_reuse) as client:
        if not login(client, url, "bob"):
            raise DrillError("cannot sign in as bob")
        context_id: str | None = None
        while len(sends) < plan.sends or (
            time.monotonic() < until and len(sends) < 10 * plan.sends
        ):
            sent = send(client, url, f"bob {len(sends)}", context_id)
            context_id = context_id or sent.run_context
            sends.append(sent)
            # A client's pace, below the server's rate limit of runs per principal.
            time.sleep(max(0.0, sent.started + PACE - time.monotonic()))
    return sends


async def drip(connections: list[Connection], every: float, until: float) -> None:
    while time.monotonic() < until:
        await asyncio.sleep(every)  # the flood's pace: a byte every few seconds
        for connection in connections:
            connection.drip()


async def flood(
    server: Server, plan: Plan, outcome: Outcome, alice: tuple[str, int], cookie: str
) -> None:
    """Open the flood, let bob send through it, judge; `alice` is her slow run's
    conversation and the seq her followers start after."""
    began = time.monotonic()
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Drip: "
    slow, slow_failed = await open_many(server.port, plan.slow, head)
    silent, silent_failed = await open_many(server.port, plan.silent, b"")
    follow = (
        f"GET /agents/slow/contexts/{alice[0]}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Cookie: {COOKIE}={cookie}\r\nLast-Event-ID: {alice[1]}\r\n\r\n"
    ).encode()
    followers, followers_failed = await open_many(server.port, plan.followers, follow, batch=50)
    opened = time.monotonic()
    outcome.figure("flood opened s", opened - began)
    until = opened + plan.hold
    try:
        dripping = asyncio.create_task(drip(slow, plan.drip, until))
        sends = await asyncio.to_thread(bystander, server.url, plan, until)
        dripping.cancel()
        await asyncio.gather(dripping, return_exceptions=True)
        judge_bystander(sends, outcome)
        judge_followers(followers, followers_failed, outcome)
        for name, group, total in (("slow", slow, plan.slow), ("silent", silent, plan.silent)):
            closed = [c.closed_at - c.opened_at for c in group if c.closed_at is not None]
            outcome.figure(f"{name} closed", f"{len(closed)}/{total}")
            if closed:
                outcome.figure(f"{name} closed after s (p50)", percentile(closed, 0.5))
            if len(closed) < len(group):
                outcome.fail(
                    f"{len(group) - len(closed)} {name} connections still open after "
                    f"{plan.hold:.0f} s; the header timeout is {HEADER_TIMEOUT:.0f} s"
                )
        if slow_failed or silent_failed:
            outcome.figure("not connected", slow_failed + silent_failed)
    finally:
        await close_all([*slow, *silent, *followers])


def judge_bystander(sends: list[Exchange], outcome: Outcome) -> None:
    outcome.tries = len(sends)
    on_time = [s for s in sends if s.acknowledged and s.seconds <= WITHIN]
    outcome.survived = len(on_time)
    outcome.lost = len(sends) - len(on_time)
    latencies = [s.seconds for s in sends]
    outcome.figure("bob p50 s", percentile(latencies, 0.5))
    outcome.figure("bob p99 s", percentile(latencies, 0.99))
    late = [s for s in sends if s not in on_time]
    if late:
        first = late[0]
        outcome.fail(
            f"{len(late)} of bob's {len(sends)} sends failed or took over {WITHIN:.0f} s; "
            f"first: {first.describe()} in {first.seconds:.1f} s"
        )


def judge_followers(followers: list[Connection], failed: int, outcome: Outcome) -> None:
    statuses = [status_of(c) for c in followers]
    accepted = sum(1 for s, c in zip(statuses, followers, strict=True) if s == 200 and c.open)
    refused = sum(1 for s in statuses if s == 429)
    outcome.figure("followers open", f"{accepted}/{len(followers) + failed}")
    outcome.figure("followers 429", refused)
    if accepted >= STREAM_CAP:  # alice's own run holds one of her streams
        outcome.fail(f"{accepted} followers of one user open: the cap is {STREAM_CAP}")
    wrong = [
        (s, c)
        for s, c in zip(statuses, followers, strict=True)
        if not (s == 429 or (s == 200 and c.open))
    ]
    if wrong or failed:
        status, connection = wrong[0] if wrong else (None, None)
        detail = bytes(connection.head[:120]) if connection is not None else b"no connection"
        outcome.fail(
            f"{len(wrong) + failed} followers neither served nor refused with 429; "
            f"first: status {status}, {detail!r}"
        )
    if b"too_many_streams" not in b"".join(bytes(c.head) for c in followers) and refused:
        outcome.fail("followers refused with 429 but not too_many_streams")


def drill(setup: Setup, outcome: Outcome) -> None:
    plan = QUICK if setup.quick else FULL
    limit = raise_file_limit(2 * (plan.slow + plan.silent + plan.followers) + 512)
    outcome.figure("ulimit -n", limit)
    env = {"THINWIRE_DEMO_SECRET": SECRET, "THINWIRE_DATA_DIR": str(setup.root / "data")}
    args = ["serve", "--factory", "chaos.floodapp:create", "--shutdown-timeout", "1"]
    args += ["--header-timeout", str(HEADER_TIMEOUT)]
    with (
        Server("flood", args, root=setup.root, env=env) as server,
        httpx.Client(timeout=httpx.Timeout(120.0, connect=5.0)) as alice,
    ):
        server.start()
        baseline = bystander(server.url, Plan(0, 0, 0, 3, 0, 0), 0)
        outcome.figure("bob p50 before s", percentile([s.seconds for s in baseline], 0.5))
        if not all(s.acknowledged for s in baseline):
            raise DrillError(f"bob's sends fail before any flood: {baseline[0].describe()}")
        if not login(alice, server.url, "alice"):
            raise DrillError("cannot sign in as alice")
        cookie = alice.cookies.get(COOKIE)
        slow_run = Streaming(
            lambda on: send(alice, server.url, "a slow one", agent="slow", on_frame=on)
        )
        slow_run.start()
        try:
            wait_until(lambda: slow_run.context_id is not None, 20, "alice's slow run started")
            assert slow_run.context_id is not None and cookie is not None
            latest = slow_run.frames[-1]["seq"]
            asyncio.run(flood(server, plan, outcome, (slow_run.context_id, latest), cookie))
            if not server.alive():
                outcome.fail(f"the server died under the flood:\n{server.log_tail(10)}")
        finally:
            server.stop()  # which ends alice's slow run before her client closes
            slow_run.result(10.0)
        setup.say("  floods: done")
