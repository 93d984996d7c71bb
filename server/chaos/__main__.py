"""`python -m chaos`: run the drills, print the table, exit 1 when a drill failed."""

from __future__ import annotations

import argparse
import random
import sys
import time

from chaos.drill import run_drill
from chaos.registry import DRILLS
from chaos.table import render

__all__ = ["main"]


def say(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few cycles of each drill")
    parser.add_argument("--only", default=",".join(DRILLS), help=f"comma-separated: {list(DRILLS)}")
    parser.add_argument("--seed", type=int, help="the random moments' seed (printed)")
    args = parser.parse_args(argv)
    names = [name for name in args.only.split(",") if name]
    unknown = set(names) - set(DRILLS)
    if unknown:
        parser.error(f"unknown drills: {sorted(unknown)}")
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    say(f"chaos: {'quick' if args.quick else 'full'} run of {', '.join(names)}; seed {seed}")
    began = time.monotonic()
    outcomes = []
    for name in names:
        say(f"{name}")
        outcome = run_drill(name, DRILLS[name], quick=args.quick, seed=seed, say=say)
        say(f"  {outcome.verdict} in {outcome.seconds:.0f} s")
        outcomes.append(outcome)
    say("")
    say(render(outcomes))
    failed = [o.drill for o in outcomes if not o.passed]
    say(
        f"\n{time.monotonic() - began:.0f} s; seed {seed}; "
        + (f"FAILED: {', '.join(failed)}" if failed else "all passed")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
