"""Judge one evaluated candidate against its parent, with a noise threshold.

The threshold comes from the timing spread itself (IQR / median of both kernels), with a
floor, so that a change inside the measurement noise is never called a win; if the agent
*claimed* a gain there, the round is invalid (the article's section 5.2). The spread is
that of single calls, while the medians compared come from hundreds of calls each, so the
threshold is capped: on the H200 one noisy parent (IQR above its median on small shapes)
otherwise hid a 1.5x win as "neutral".
"""

from __future__ import annotations

import statistics
from typing import Any

from kb.record import Verdict

MIN_NOISE = 0.02
MAX_NOISE = 0.10
_INCORRECT_KINDS = ("wrong_result", "bias", "cheat_")


def relative_spread(timings: dict[str, tuple[float, float]]) -> float:
    """Median over shapes of IQR / median: how noisy this kernel's timing is."""
    spreads = [iqr / med for med, iqr in timings.values() if med and iqr is not None]
    return statistics.median(spreads) if spreads else 0.0


def noise_threshold(result: Any, parent: Any | None, floor: float = MIN_NOISE) -> float:
    """Relative change below which a timing difference is noise."""
    spread = relative_spread(getattr(result, "timings", {}) or {})
    if parent is not None:
        spread += relative_spread(getattr(parent, "timings", {}) or {})
    return min(MAX_NOISE, max(floor, spread))


def judge(result: Any, parent: Any | None, *, claimed_gain: bool, noise: float) -> Verdict:
    """improved / neutral / regressed / incorrect / failed / invalid, from an EvalResult."""
    if not result.ok:
        kind = result.error_kind or ""
        if result.stage == "correctness" or kind.startswith(_INCORRECT_KINDS):
            return Verdict.incorrect
        return Verdict.failed
    child_ms = result.time_ms if result.timing_available else None
    # the parent over the same shapes, with any shape re-timed beside the child
    parent_ms = getattr(result, "parent_ms", None) or (
        getattr(parent, "time_ms", None) if parent is not None else None)
    if child_ms is None or parent_ms is None or result.suspect:
        return Verdict.neutral  # correct but not (trustworthily) timed: 'verified'
    ratio = parent_ms / child_ms
    if ratio > 1.0 + noise:
        return Verdict.improved
    if ratio < 1.0 / (1.0 + noise):
        return Verdict.regressed
    return Verdict.invalid if claimed_gain else Verdict.neutral
