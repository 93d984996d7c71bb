"""Running one drill: a fresh directory, a seeded random source, and whatever goes wrong
written into its `Outcome` rather than raised.

A drill is a function `(setup, outcome) -> None` that fills in `outcome` as it goes, so
what it found before a `DrillError` still counts.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from chaos.outcome import DrillError, Outcome, Skip

__all__ = ["SECRET", "Body", "Setup", "run_drill"]

#: The demo cookie secret every server of a drill shares (replicas accept each other's).
SECRET = "chaos-drill-demo-secret"


@dataclass(frozen=True)
class Setup:
    root: Path  # the drill's own directory: data, logs
    quick: bool
    rng: random.Random
    say: Callable[[str], None]  # a progress line


Body = Callable[[Setup, Outcome], None]


def run_drill(
    name: str, body: Body, *, quick: bool, seed: int, say: Callable[[str], None]
) -> Outcome:
    """Run `body`; its directory is removed when it passed and kept (named in the
    outcome) when it did not, for its logs."""
    outcome = Outcome(name)
    root = Path(tempfile.mkdtemp(prefix=f"chaos-{name}-"))
    began = time.monotonic()
    try:
        body(Setup(root, quick, random.Random(f"{seed}:{name}"), say), outcome)
    except Skip as exc:
        outcome.skipped = str(exc)
    except DrillError as exc:
        outcome.fail(f"drill stopped: {exc}")
    except Exception as exc:
        say("".join(traceback.format_exception(exc)))
        outcome.fail(f"drill crashed: {type(exc).__name__}: {exc}")
    finally:
        outcome.seconds = time.monotonic() - began
        if outcome.passed:
            shutil.rmtree(root, ignore_errors=True)
        else:
            outcome.directory = str(root)
    return outcome
