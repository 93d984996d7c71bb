"""diskfull: the SQLite store on a filesystem that runs out of room, and back.

The data directory lives on a tmpfs of 3 MiB. Each cycle — a conversation of a user of
its own — fills it with a filler file, then sends: once the server's writes no longer
fit, every send must fail with a typed, retryable error — `503 store_unavailable` with
a `Retry-After` header — within its read timeout, never a 500, an untyped body, a cut
stream or a hang. (A send that still lands — SQLite reuses its WAL after a checkpoint —
is acknowledged and must be kept.) Once a send was refused, `/readyz` must answer that
typed 503 too (reads still work on a full disk: it must not rest on one), so a balancer
takes the replica out. Then the filler is deleted: `/readyz` must answer 200 again
within READY_AGAIN seconds with no send (its probe of a write lands), and the very next
send must succeed, with no restart. At the end every acknowledged turn must be in its
transcript, and the file must pass `PRAGMA integrity_check`.

tries: sends; survived: acknowledged and kept; lost: acknowledged and not kept. A
refusal that is not the typed 503 is a failure of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

from chaos.client import TIMEOUT, Exchange, login, send
from chaos.client import exchange as request
from chaos.conversation import Conversation
from chaos.drill import SECRET, Setup
from chaos.drills.common import check_conversations, count_server_errors, tally
from chaos.mount import fill, small_filesystem
from chaos.outcome import DrillError, Outcome
from chaos.procs import Server
from chaos.sqlite_check import integrity
from chaos.timing import wait_until

__all__ = ["drill"]

SIZE = "3m"
#: Seconds from freeing the disk to `/readyz` answering 200 (it probes once a second).
READY_AGAIN = 5.0
#: A user per cycle: each principal's sends stay within the server's rate limit.
USERS = ("alice", "bob", "carol", "guest")


@dataclass(frozen=True)
class Plan:
    cycles: int
    #: Sends judged once the first one was refused.
    while_full: int
    #: Sends tried before giving up on the disk ever refusing one.
    most_until_full: int = 20


QUICK = Plan(cycles=2, while_full=3)
FULL = Plan(cycles=4, while_full=8)


def well_refused(exchange: Exchange) -> str | None:
    """None for the refusal a full disk is due; else what is wrong with this one."""
    if exchange.status == 503 and exchange.code == "store_unavailable":
        if exchange.retryable is not True:
            return "503 store_unavailable not marked retryable"
        if exchange.retry_after is None:
            return "503 store_unavailable without a Retry-After header"
        return None
    return exchange.describe()


def readiness(client: httpx.Client, url: str) -> Exchange:
    """`GET /readyz`, as a balancer checks it."""
    return request(client, "GET", f"{url}/readyz", Exchange("", None), None)


def one_cycle(
    url: str, volume: Path, cycle: int, plan: Plan, outcome: Outcome
) -> tuple[Conversation, list[Exchange]]:
    """A conversation of its own (each cycle's user stays within the rate limit): two
    sends, fill the disk, sends judged, free it, one more; the conversation and the
    sends refused while the disk was full."""
    user = USERS[cycle % len(USERS)]
    conversation = Conversation(user)
    with httpx.Client(timeout=TIMEOUT) as client:
        if not login(client, url, user):
            raise DrillError(f"cannot sign in as {user}")

        def talk() -> Exchange:
            text = f"{user} message {len(conversation.exchanges) + 1}"
            exchange = send(client, url, text, conversation.context_id)
            conversation.record(exchange)
            return exchange

        for _ in range(2):
            before = talk()
            if not before.acknowledged:
                raise DrillError(f"a send before the disk is full: {before.describe()}")
        filler = volume / f"filler-{cycle}"
        fill(filler)
        try:
            tried = (talk() for _ in range(plan.most_until_full))
            first = next((e for e in tried if not e.acknowledged), None)
            if first is None:
                outcome.fail(f"cycle {cycle}: {plan.most_until_full} sends landed on a full disk")
                return conversation, []
            judged = [first] + [talk() for _ in range(plan.while_full - 1)]
            if not judged[-1].acknowledged:  # else a save landed: the store took it
                ready = readiness(client, url)
                why = "200, ready" if ready.status == 200 else well_refused(ready)
                if why is not None:
                    outcome.fail(f"cycle {cycle}: /readyz on a full disk: {why}")
        finally:
            filler.unlink()
        try:
            wait_until(
                lambda: readiness(client, url).status == 200,
                READY_AGAIN,
                f"cycle {cycle}: /readyz 200 once the disk was freed, with no send",
            )
        except DrillError as exc:
            outcome.fail(str(exc))
        refused = [e for e in judged if not e.acknowledged]
        wrong = [why for e in refused if (why := well_refused(e)) is not None]
        if wrong:
            outcome.fail(
                f"cycle {cycle}: {len(wrong)} of {len(judged)} sends on a full disk were not "
                f"a typed 503; first: {wrong[0]}"
            )
        after = talk()
        if not after.acknowledged:
            outcome.fail(
                f"cycle {cycle}: the first send after freeing the disk: {after.describe()}"
            )
    return conversation, refused


def drill(setup: Setup, outcome: Outcome) -> None:
    plan = QUICK if setup.quick else FULL
    with small_filesystem(setup.root / "small", SIZE) as volume:
        data = volume / "data"
        args = ["demo", "--delay", "0", "--data-dir", str(data)]
        conversations: list[Conversation] = []
        refused: list[Exchange] = []
        with Server("demo", args, root=setup.root, env={"THINWIRE_DEMO_SECRET": SECRET}) as server:
            server.start()
            for cycle in range(plan.cycles):
                conversation, refusals = one_cycle(server.url, volume, cycle, plan, outcome)
                conversations.append(conversation)
                refused += refusals
                setup.say(f"  diskfull: cycle {cycle + 1}/{plan.cycles}")
            check_conversations(server.url, conversations, outcome)
        exchanges = [e for c in conversations for e in c.exchanges]
        outcome.tries = len(exchanges)
        outcome.figure("on full disk", tally(refused))
        outcome.figure("5xx", count_server_errors(exchanges, outcome, "diskfull"))
        check = integrity(data / "thinwire.sqlite3")
        outcome.figure("integrity", check)
        if check != "ok":
            outcome.fail(f"integrity_check at the end: {check}")
