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

from kernelkb.kernels.shared.comparison import failure_verdict, outcome
from kernelkb.kernels.shared.vocabulary import Verdict
from kernelkb.optimizer.sandbox.result import EvalResult

MIN_NOISE = 0.02
MAX_NOISE = 0.10


def relative_spread(timings: dict[str, tuple[float, float]]) -> float:
    """Median over shapes of IQR / median: how noisy this kernel's timing is."""
    spreads = [iqr / med for med, iqr in timings.values() if med and iqr is not None]
    return statistics.median(spreads) if spreads else 0.0


def noise_threshold(result: EvalResult, parent: EvalResult | None,
                    floor: float = MIN_NOISE) -> float:
    """Relative change below which a timing difference is noise: the comparison's floor
    where there is one, else the spread rule."""
    if result.comparison:
        return result.comparison.noise_floor
    spread = relative_spread(result.timings)
    if parent is not None:
        spread += relative_spread(parent.timings)
    return min(MAX_NOISE, max(floor, spread))


def judge(result: EvalResult, parent: EvalResult | None, *, claimed_gain: bool,
          noise: float) -> Verdict:
    """improved / neutral / regressed / incorrect / failed / invalid, from an evaluation:
    the rule itself is kernels/shared/comparison.py."""
    if not result.ok:
        return failure_verdict(result.error_kind, result.stage)
    if result.suspect:
        return Verdict.neutral
    if result.comparison:
        found = result.comparison.outcome
        if found is not Verdict.neutral:
            return found
        return Verdict.invalid if claimed_gain else Verdict.neutral
    if result.gpu_timings:
        return Verdict.neutral  # timed, but not beside its parent: no verdict
    child_ms = result.time_ms if result.timing_available else None
    # the parent over the same shapes, with any shape re-timed beside the child
    parent_ms = result.parent_ms or (parent.time_ms if parent is not None else None)
    if child_ms is None or parent_ms is None:
        return Verdict.neutral  # correct but not (trustworthily) timed: 'verified'
    found = outcome(parent_ms / child_ms, parent_ms / child_ms, noise)  # one figure each
    if found is not Verdict.neutral:
        return found
    return Verdict.invalid if claimed_gain else Verdict.neutral
