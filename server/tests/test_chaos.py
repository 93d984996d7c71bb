"""The fault drills of `make chaos` (server/chaos), each in its quick version: servers
SIGKILLed and SIGTERMed mid-run, a full disk, Redis and a replica gone, floods. Nothing
acknowledged may be lost, every refusal must be typed, service must come back.

A drill whose prerequisite is missing here — redis-server, permission to mount a
tmpfs — is skipped with the reason. Each starts its own processes and stops them by
PID however it ends. The drills' own checker is tested first: it must catch a lost,
altered, repeated or reordered turn.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from chaos.client import Exchange
from chaos.conversation import Conversation, audit
from chaos.drill import run_drill
from chaos.registry import DRILLS
from chaos.table import render


def acknowledged(text: str, reply: str | None, context_id: str | None = "ctx-1") -> Exchange:
    exchange = Exchange(text, context_id)
    exchange.frames.append({"type": "run_start", "contextId": "ctx-1"})
    if reply is not None:
        exchange.frames.append({"type": "done", "text": reply, "stopReason": "end"})
    return exchange


def turns(*pairs: tuple[str, str | None]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for text, reply in pairs:
        out.append({"role": "user", "text": text})
        if reply is not None:
            stop = "interrupted" if reply == "" else "end"
            out.append({"role": "assistant", "text": reply, "stopReason": stop})
    return out


def test_the_checker_catches_what_was_lost_repeated_or_reordered() -> None:
    conversation = Conversation("alice")
    conversation.record(acknowledged("m1", "r1", context_id=None))
    conversation.record(acknowledged("m2", None))  # cut: not acknowledged
    conversation.record(acknowledged("m3", "r3"))
    kept = audit(conversation, turns(("m1", "r1"), ("m2", ""), ("m3", "r3")))
    assert (kept.kept, kept.lost, kept.problems) == (2, [], [])
    lost = audit(conversation, turns(("m1", "r1"), ("m2", "")))
    assert lost.kept == 1 and lost.lost == ["ctx-1: acknowledged 'm3' is missing"]
    altered = audit(conversation, turns(("m1", "r1"), ("m3", "other")))
    assert altered.lost and "another reply" in altered.lost[0]
    repeated = audit(conversation, turns(("m1", "r1"), ("m3", "r3"), ("m3", "r3")))
    assert "there 2 times" in repeated.problems[0]
    reordered = audit(conversation, turns(("m3", "r3"), ("m1", "r1")))
    assert reordered.problems == ["ctx-1: user turns out of the order sent"]
    orphan = audit(conversation, turns(("m1", "r1"), ("m2", None), ("m3", "r3")))
    assert orphan.problems == ["ctx-1: user turn 'm2' has no reply after it"]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("name", list(DRILLS))
def test_quick_drill_loses_nothing_acknowledged(name: str) -> None:
    seed = random.randrange(1 << 32)
    outcome = run_drill(name, DRILLS[name], quick=True, seed=seed, say=lambda line: None)
    if outcome.skipped is not None:
        pytest.skip(outcome.skipped)
    assert outcome.lost == 0 and outcome.passed, f"seed {seed}\n{render([outcome])}"
