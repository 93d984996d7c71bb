"""The table printed at the end of a run: a row per drill, then what went wrong."""

from __future__ import annotations

from collections.abc import Sequence

from chaos.outcome import Outcome

__all__ = ["render"]

COLUMNS = ("drill", "result", "tries", "survived", "lost", "seconds", "figures")


def row(outcome: Outcome) -> list[str]:
    figures = "  ".join(f"{name}={value}" for name, value in outcome.figures.items())
    if outcome.skipped is not None:
        figures = f"skipped: {outcome.skipped}"
    return [
        outcome.drill,
        outcome.verdict,
        str(outcome.tries),
        str(outcome.survived),
        str(outcome.lost),
        f"{outcome.seconds:.0f}",
        figures,
    ]


def render(outcomes: Sequence[Outcome]) -> str:
    rows = [list(COLUMNS), *(row(o) for o in outcomes)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for cells in rows:
        padded = [cell.ljust(width) for cell, width in zip(cells, widths, strict=False)]
        lines.append("  ".join([*padded, cells[-1]]).rstrip())
    lines.insert(1, "-" * min(120, max(len(line) for line in lines)))
    for outcome in outcomes:
        if outcome.failures:
            lines.append("")
            lines.append(f"{outcome.drill}: {len(outcome.failures)} failures, first:")
            lines += [f"  - {message}" for message in outcome.failures[:5]]
            if len(outcome.failures) > 5:
                lines.append(f"  … and {len(outcome.failures) - 5} more")
        if outcome.directory is not None:
            lines.append(f"  logs: {outcome.directory}")
    return "\n".join(lines)
