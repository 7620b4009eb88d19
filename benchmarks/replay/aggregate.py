"""From replayed runs to the figures of the transfer report: per task and arm."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from benchmarks.replay.metrics import (
    GRID_TOLERANCE,
    best_so_far,
    expected_random_order,
    quantile,
    summarize,
)
from benchmarks.replay.runs import RunTrace
from benchmarks.replay.space import Space


def arm_summary(traces: Sequence[RunTrace]) -> dict[str, Any]:
    """Medians with spread over the repeats of one arm on one task."""
    metrics = [t.metrics for t in traces]
    evaluations = sum(m.evaluations for m in metrics)
    return {
        "repeats": len(traces),
        "to_95": summarize([m.to_95 for m in metrics]),
        "to_grid_3pct": summarize([m.to_grid_3pct for m in metrics]),
        "final_speedup": summarize([m.final_speedup for m in metrics]),
        "evaluations": summarize([m.evaluations for m in metrics]),
        "unmeasured": sum(m.unmeasured for m in metrics),
        "failed": sum(m.failed for m in metrics),
        "total_evaluations": evaluations,
        "retrieved": summarize([t.retrieved for t in traces]),
        "stop_reasons": dict(Counter(t.stop_reason for t in traces)),
        "winners": dict(Counter(m.winner for m in metrics).most_common()),
    }


def curve(traces: Sequence[RunTrace], best_known_ms: float, budget: int) -> dict[str, list]:
    """Best-so-far as a share of the best known time (1.0 = best), median and IQR per
    evaluation; a run that stopped early keeps its last value."""
    shares = []
    for trace in traces:
        row = [best_known_ms / b if b else 0.0 for b in best_so_far(trace.calls)]
        row += [row[-1] if row else 0.0] * (budget - len(row))
        shares.append(row[:budget])
    columns = list(zip(*shares, strict=True))
    return {"evaluation": list(range(1, budget + 1)),
            "median": [quantile(c, 0.5) for c in columns],
            "q1": [quantile(c, 0.25) for c in columns],
            "q3": [quantile(c, 0.75) for c in columns]}


def brute_force(space: Space) -> dict[str, Any]:
    """The exhaustive grid as the reference a guided search must beat."""
    timed = space.timed()
    best = space.best_ms
    hits = sum(1 for t in timed.values() if t <= best * (1 + GRID_TOLERANCE))
    return {"grid_size": space.space_size, **space.counts(), "best_key": space.best_key,
            "best_ms": best, "default_ms": space.default_ms,
            "best_speedup_vs_default": (space.default_ms or 0) / best,
            "within_3pct": hits,
            "random_order_expected": expected_random_order(space.space_size, hits)}


def same_traces(a: Sequence[RunTrace], b: Sequence[RunTrace]) -> bool:
    """Did two arms evaluate exactly the same candidates in the same order?"""
    return [[c.key for c in t.calls] for t in a] == [[c.key for c in t.calls] for t in b]
