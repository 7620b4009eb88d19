"""What a replayed run achieved, and medians with spread over repeats.

Conventions (Kernel Tuner's, stated in the report): an evaluation is one candidate the
loop measured, the starting kernel included, the final shape sweep excluded. "Reached X"
means the best time measured so far meets X. A target never reached within the budget
is censored: it counts as infinity in medians and quantiles (shown as "> budget") and
the report says how many repeats reached it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.replay.evaluator import Call

NEAR_BEST = 0.95  # "95% of the best": time <= best / 0.95
GRID_TOLERANCE = 0.03  # "within 3% of the grid's best": time <= best * 1.03


def best_so_far(calls: Sequence[Call]) -> list[float | None]:
    """Best measured time after each evaluation (None until something is timed)."""
    best: float | None = None
    out = []
    for call in calls:
        if call.time_ms is not None and (best is None or call.time_ms < best):
            best = call.time_ms
        out.append(best)
    return out


def evaluations_to(calls: Sequence[Call], threshold_ms: float) -> int | None:
    """1-based count of evaluations until a measured time <= threshold; None if never."""
    for i, best in enumerate(best_so_far(calls), 1):
        if best is not None and best <= threshold_ms:
            return i
    return None


@dataclass(frozen=True)
class RunMetrics:
    evaluations: int
    to_95: int | None  # evaluations to reach 95% of the best known time
    to_grid_3pct: int | None  # evaluations to get within 3% of the grid's best
    final_speedup: float | None  # naive default time / time of the loop's chosen best
    best_found_ms: float | None
    unmeasured: int  # proposals the space could not score (untimed or absent)
    failed: int  # proposals the space records as failing
    winner: str | None  # config key of the loop's chosen best


def run_metrics(calls: Sequence[Call], *, best_known_ms: float, default_ms: float,
                chosen_ms: float | None, winner: str | None) -> RunMetrics:
    times = [c.time_ms for c in calls if c.time_ms is not None]
    return RunMetrics(
        evaluations=len(calls),
        to_95=evaluations_to(calls, best_known_ms / NEAR_BEST),
        to_grid_3pct=evaluations_to(calls, best_known_ms * (1 + GRID_TOLERANCE)),
        final_speedup=default_ms / chosen_ms if chosen_ms else None,
        best_found_ms=min(times) if times else None,
        unmeasured=sum(1 for c in calls if c.status in ("untimed", "absent")),
        failed=sum(1 for c in calls if c.status == "failed"),
        winner=winner,
    )


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile that keeps infinity (a censored run) as infinity."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of nothing")
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    if math.isinf(ordered[lo]) or math.isinf(ordered[hi]):
        return math.inf
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def summarize(values: Sequence[float | None]) -> dict[str, float | int]:
    """median, q1, q3, min, max over repeats (None = censored = inf) and how many reached."""
    filled = [math.inf if v is None else float(v) for v in values]
    return {"median": quantile(filled, 0.5), "q1": quantile(filled, 0.25),
            "q3": quantile(filled, 0.75), "min": min(filled), "max": max(filled),
            "reached": sum(1 for v in values if v is not None), "n": len(values)}


def expected_random_order(grid: int, hits: int) -> float | None:
    """Expected evaluations until the first hit when the grid is walked in random order."""
    return (grid + 1) / (hits + 1) if hits else None
