"""Percentiles and the little arithmetic the suites share."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["percentile"]


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]
