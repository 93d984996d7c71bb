"""sigterm: runs in progress when the server is told to stop; what each client saw of
its reply before the cut must be kept.

Four clients (four demo users) each start a run; once every run has begun and a random
number of reply tokens has arrived between them, the server gets SIGTERM (with a short
`--shutdown-timeout`). It must exit in time. After a restart, for each run:

- the transcript's last turns are its user message and an assistant turn with stop
  reason `interrupted` (or, if the client saw `done`, exactly that `done`), whose text
  starts with the token deltas the client had received;
- reattaching with the last seq the client saw sends every missing frame once, in
  order, ending with that `done`: the deltas the client had plus the ones it gets now
  are the whole saved reply.

tries: runs cut; survived: runs whose partial reply was kept and delivered; lost: not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

from chaos.client import TIMEOUT, Exchange, follow, login, send, transcript
from chaos.drill import SECRET, Setup
from chaos.drills.common import count_server_errors, tally
from chaos.outcome import DrillError, Outcome
from chaos.procs import Server
from chaos.sqlite_check import integrity
from chaos.streams import Streaming
from chaos.timing import wait_until

__all__ = ["drill"]

USERS = ("alice", "bob", "carol", "guest")
SHUTDOWN_TIMEOUT = 0.5
#: How much longer than its shutdown timeout the server may take to exit.
EXIT_SLACK = 10.0


@dataclass(frozen=True)
class Plan:
    cycles: int
    delay: float = 0.05  # a run streams ~30 pieces, this far apart
    most_tokens: int = 16  # SIGTERM after 0..most reply tokens across the runs


QUICK = Plan(cycles=2)
FULL = Plan(cycles=8)


def message(user: str, cycle: int) -> str:
    """A message whose reply (which quotes it) streams for longer than the shutdown
    grace, so SIGTERM cuts runs rather than letting them finish."""
    return f"{user} cut {cycle}: " + " ".join(["word"] * 40)


def judge(client: httpx.Client, url: str, cut: Exchange) -> str | None:
    """None when the run's partial reply was kept and is delivered whole; else why not."""
    context_id = cut.run_context
    if context_id is None:
        return f"no run_start ({cut.describe()})"
    seqs = [f["seq"] for f in cut.frames]
    if seqs != list(range(seqs[0], seqs[0] + len(seqs))):
        return f"the stream's seqs skip or repeat: {seqs}"
    done = cut.done
    rest: list[dict[str, Any]] = []
    if done is None:
        reattach = follow(client, url, context_id, seqs[-1])
        if reattach.status != 200 or reattach.done is None:
            return f"reattach after seq {seqs[-1]}: {reattach.describe()}"
        rest = reattach.frames
        if [f["seq"] for f in rest] != list(range(seqs[-1] + 1, seqs[-1] + 1 + len(rest))):
            return f"reattach after seq {seqs[-1]} sent seqs {[f['seq'] for f in rest]}"
        done = reattach.done
        if done["stopReason"] != "interrupted":
            return f"the cut run ended {done['stopReason']!r}, not 'interrupted'"
    received = cut.streamed
    whole = received + "".join(f["delta"] for f in rest if f["type"] == "token")
    if whole != done["text"]:
        return f"deltas {whole!r} != done text {done['text']!r}"
    turns = transcript(client, url, context_id)["turns"]
    asked = ("user", cut.text, None)
    if len(turns) < 2 or (turns[-2]["role"], turns[-2]["text"], turns[-2]["stopReason"]) != asked:
        return f"the user message is not the last but one turn: {turns[-2:]}"
    reply = turns[-1]
    if reply["role"] != "assistant" or reply["stopReason"] != done["stopReason"]:
        return f"last turn {reply['role']} {reply['stopReason']}, done said {done['stopReason']}"
    if not reply["text"].startswith(received):
        return f"kept {reply['text']!r}, but the client had seen {received!r}"
    if reply["text"] != done["text"]:
        return f"kept {reply['text']!r}, done said {done['text']!r}"
    return None


def cut_runs(
    server: Server, clients: list[httpx.Client], contexts: dict[str, str | None], due: int
) -> tuple[list[Exchange], float | None]:
    """Start a run per user, SIGTERM the server once `due` tokens arrived; the runs as
    their clients saw them, and the seconds the server took to exit (None: killed)."""

    def run_of(client: httpx.Client, user: str) -> Streaming:
        text = message(user, server.starts)
        return Streaming(lambda on: send(client, server.url, text, contexts[user], on_frame=on))

    runs = [run_of(client, user) for client, user in zip(clients, USERS, strict=True)]
    for run in runs:
        run.start()

    def started() -> bool:
        return (
            all(r.counts["run_start"] for r in runs) and sum(r.counts["token"] for r in runs) >= due
        )

    wait_until(started, 30, "every run started")
    took = server.terminate(SHUTDOWN_TIMEOUT + EXIT_SLACK)
    cuts = [run.result(TIMEOUT.read or 10.0) for run in runs]
    missing = [user for user, cut in zip(USERS, cuts, strict=True) if cut is None]
    if missing:
        raise DrillError(f"the sends of {missing} did not return after the shutdown")
    return [cut for cut in cuts if cut is not None], took


def drill(setup: Setup, outcome: Outcome) -> None:
    plan = QUICK if setup.quick else FULL
    data = setup.root / "data"
    args = ["demo", "--delay", str(plan.delay), "--data-dir", str(data)]
    args += ["--shutdown-timeout", str(SHUTDOWN_TIMEOUT)]
    contexts: dict[str, str | None] = dict.fromkeys(USERS)
    exits: list[float] = []
    cuts: list[Exchange] = []
    with Server("demo", args, root=setup.root, env={"THINWIRE_DEMO_SECRET": SECRET}) as server:
        server.start()
        for cycle in range(plan.cycles):
            clients = [httpx.Client(timeout=TIMEOUT) for _ in USERS]
            try:
                for client, user in zip(clients, USERS, strict=True):
                    if not login(client, server.url, user):
                        raise DrillError(f"cannot sign in as {user}")
                due = setup.rng.randint(0, plan.most_tokens)
                cycle_cuts, took = cut_runs(server, clients, contexts, due)
                if took is None:
                    outcome.fail(
                        f"cycle {cycle}: still running {EXIT_SLACK:.0f} s past its shutdown "
                        "timeout after SIGTERM (killed)"
                    )
                else:
                    exits.append(took)
                server.start()
                for cut, client, user in zip(cycle_cuts, clients, USERS, strict=True):
                    cuts.append(cut)
                    outcome.tries += 1
                    contexts[user] = cut.run_context or contexts[user]
                    wrong = judge(client, server.url, cut)
                    if wrong is None:
                        outcome.survived += 1
                    else:
                        outcome.lost += 1
                        outcome.fail(f"cycle {cycle}, {user}: {wrong}")
            finally:
                for client in clients:
                    client.close()
            setup.say(f"  sigterm: cycle {cycle + 1}/{plan.cycles}")
    outcome.figure("exit s (max)", max(exits, default=0.0))
    outcome.figure("had tokens", f"{sum(bool(c.streamed) for c in cuts)}/{len(cuts)}")
    outcome.figure("seen at cut", tally(cuts))
    outcome.figure("5xx", count_server_errors(cuts, outcome, "sigterm"))
    check = integrity(data / "thinwire.sqlite3")
    outcome.figure("integrity", check)
    if check != "ok":
        outcome.fail(f"integrity_check at the end: {check}")
