"""Judge one evaluated candidate against its parent.

On a GPU the verdict is the outcome of the interleaved comparison the worker made
(optimizer/sandbox/compare.py): improved or regressed only when the whole 95% interval of
the GPU-time ratio clears the noise floor; if the agent *claimed* a gain that the interval
does not show, the round is invalid (the article's section 5.2). A timed result with no
comparison (the incumbent would not run beside it) is neutral: figures from two
evaluations are not compared. Figures without GPU time at all (a replay of stored
measurements) fall back to the spread rule below: a threshold from the IQR / median of
both kernels, floored and capped.
"""

from __future__ import annotations

import statistics
from typing import Any

from kernelkb.kernels.shared.vocabulary import Verdict

MIN_NOISE = 0.02
MAX_NOISE = 0.10
_INCORRECT_KINDS = ("wrong_result", "bias", "cheat_")
_NOT_A_CORRECTNESS_VERDICT = ("timeout", "out_of_memory", "crash", "missing_run")


def relative_spread(timings: dict[str, tuple[float, float]]) -> float:
    """Median over shapes of IQR / median: how noisy this kernel's timing is."""
    spreads = [iqr / med for med, iqr in timings.values() if med and iqr is not None]
    return statistics.median(spreads) if spreads else 0.0


def noise_threshold(result: Any, parent: Any | None, floor: float = MIN_NOISE) -> float:
    """Relative change below which a timing difference is noise: the comparison's floor
    where there is one, else the spread rule."""
    comparison = getattr(result, "comparison", None)
    if comparison:
        return float(comparison["noise_floor"])
    spread = relative_spread(getattr(result, "timings", {}) or {})
    if parent is not None:
        spread += relative_spread(getattr(parent, "timings", {}) or {})
    return min(MAX_NOISE, max(floor, spread))


def judge(result: Any, parent: Any | None, *, claimed_gain: bool, noise: float) -> Verdict:
    """improved / neutral / regressed / incorrect / failed / invalid, from an EvalResult."""
    if not result.ok:
        kind = result.error_kind or ""
        if kind in _NOT_A_CORRECTNESS_VERDICT:  # ran out of time or memory: not wrong
            return Verdict.failed
        if result.stage == "correctness" or kind.startswith(_INCORRECT_KINDS):
            return Verdict.incorrect
        return Verdict.failed
    if result.suspect:
        return Verdict.neutral
    comparison = getattr(result, "comparison", None)
    if comparison:
        outcome = comparison["outcome"]
        if outcome in ("improved", "regressed"):
            return Verdict(outcome)
        return Verdict.invalid if claimed_gain else Verdict.neutral
    if getattr(result, "gpu_timings", None):
        return Verdict.neutral  # timed, but not beside its parent: no verdict
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
