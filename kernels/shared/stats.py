"""The geometric mean: how a kernel's times over several shapes become one figure (a
speedup of 2x on one shape and 0.5x on another is no change), in the sandbox, the
optimizer, retrieval and the benchmarks alike."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def geomean(values: Iterable[float], weights: Sequence[float] | None = None) -> float:
    """exp of the (weighted) mean of the logs of ``values``, all > 0; ``weights`` (one
    per value) count each value that many times. ValueError for no values, a value
    <= 0, or weights of another length."""
    values = list(values)
    if not values:
        raise ValueError("geomean of no values")
    if not weights:
        return math.exp(sum(math.log(v) for v in values) / len(values))
    total = sum(weights)
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights, strict=True)) / total)
