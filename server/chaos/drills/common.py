"""What several drills judge the same way: the outcome of a batch of exchanges, and a
conversation's transcript against what was acknowledged."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import httpx2 as httpx

from chaos.client import TIMEOUT, Exchange, login, transcript
from chaos.conversation import Conversation, audit
from chaos.drill import SECRET, Setup
from chaos.outcome import DrillError, Outcome
from chaos.procs import Server
from chaos.redis_server import RedisServer

__all__ = ["check_conversations", "count_server_errors", "demo_replica", "tally"]


def demo_replica(
    setup: Setup, redis: RedisServer, name: str, *, delay: float, lease_ttl: float
) -> Server:
    """A demo replica on `redis` (a key prefix of the drill's own), with the secret every
    replica shares, so each accepts the others' cookies."""
    store = f"{redis.url}?prefix=chaos-{redis.port}"
    args = ["demo", "--delay", str(delay), "--data-dir", str(setup.root / name), "--store", store]
    env = {"THINWIRE_DEMO_SECRET": SECRET, "THINWIRE_LEASE_TTL": str(lease_ttl)}
    return Server(name, args, root=setup.root, env=env)


def tally(exchanges: Iterable[Exchange]) -> str:
    """What happened to them, most frequent first: `ok 41, cut 3, 503 store_unavailable 2`."""
    counts = Counter(e.kind for e in exchanges)
    return ", ".join(f"{kind} {n}" for kind, n in counts.most_common()) or "none"


def count_server_errors(exchanges: Iterable[Exchange], outcome: Outcome, where: str) -> int:
    """Every 5xx other than a typed 503 store_unavailable is a failure; how many."""
    bad = [
        e
        for e in exchanges
        if e.status is not None
        and e.status >= 500
        and not (e.status == 503 and e.code == "store_unavailable")
    ]
    if bad:
        outcome.fail(f"{where}: {len(bad)} server errors, first {bad[0].describe()}")
    return len(bad)


def check_conversations(url: str, conversations: Iterable[Conversation], outcome: Outcome) -> None:
    """Read each conversation's transcript as its owner and count what was kept."""
    for conversation in conversations:
        if conversation.context_id is None:
            if conversation.acknowledged:
                raise DrillError("an acknowledged send without a conversation")
            continue
        with httpx.Client(timeout=TIMEOUT) as client:
            if not login(client, url, conversation.owner):
                raise DrillError(f"cannot sign in as {conversation.owner} to read the transcript")
            body = transcript(client, url, conversation.context_id)
        if body.get("activeRunId") is not None:
            outcome.fail(f"{conversation.context_id}: a run still marked active at the end")
        result = audit(conversation, body["turns"])
        outcome.survived += result.kept
        outcome.lost += len(result.lost)
        for message in result.lost + result.problems:
            outcome.fail(message)
