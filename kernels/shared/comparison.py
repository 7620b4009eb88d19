"""The verdict rule, written once: how paired timing rounds become a ratio with its 95%
interval, and how that interval (or a failure) becomes a verdict.

Every door into measurement reads it: the full judge's interleaved comparison
(optimizer/sandbox/compare.py), the fast door's space-wide rounds (optimizer/sweep.py),
the loop's verdict (optimizer/verdict.py), the journals turned into seeds and the
benchmarks. A figure from one evaluation against a figure from another is never a
verdict: only an interval of paired rounds is, and only "improved" or "regressed" when
the whole interval clears the noise floor.

Standard library only: the sandbox's worker, the store and the benchmarks import it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kernelkb.kernels.shared.vocabulary import Verdict

NOISE_FLOOR = 0.01  # a ratio inside 1 +/- this is no change, however sure the interval

# failure kinds that say nothing about the numbers: the run ran out of time or memory
NOT_A_CORRECTNESS_FAILURE = ("timeout", "out_of_memory", "crash", "missing_run",
                             "worker_died")
INCORRECT_KINDS = ("wrong_result", "bias", "cheat_")

# two-sided 95% quantiles of Student's t by degrees of freedom (1..30); above: 1.96 + 2.4/df
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    if df < 1:
        return math.inf
    return _T975[df - 1] if df <= len(_T975) else 1.96 + 2.4 / df


def mean_interval(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half width of its 95% interval) of independent replicates."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.inf
    return mean, t975(len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))


def outcome(low: float, high: float, floor: float = NOISE_FLOOR) -> Verdict:
    """improved / regressed when the whole interval of the ratio (incumbent time over
    candidate time) clears the floor, else neutral."""
    if low > 1.0 + floor:
        return Verdict.improved
    if high < 1.0 / (1.0 + floor):
        return Verdict.regressed
    return Verdict.neutral


def may_improve(high: float, floor: float = NOISE_FLOOR) -> bool:
    """Whether an interval leaves room for a gain beyond the floor."""
    return high > 1.0 + floor


def failure_verdict(error_kind: str | None, stage: str | None) -> Verdict:
    """A failed evaluation's verdict: incorrect when the numbers were wrong (or a cheat
    was caught), failed when it never got to show them."""
    kind = error_kind or ""
    if kind in NOT_A_CORRECTNESS_FAILURE:
        return Verdict.failed
    if stage == "correctness" or kind.startswith(INCORRECT_KINDS):
        return Verdict.incorrect
    return Verdict.failed


@dataclass
class ShapeComparison:
    ratio: float  # incumbent GPU time / candidate GPU time (> 1: the candidate is faster)
    low: float
    high: float
    candidate_ms: float  # median GPU ms over every sample
    candidate_iqr_ms: float
    incumbent_ms: float
    candidate_host_ms: float
    incumbent_host_ms: float


@dataclass
class Comparison:
    """The verdict's evidence: the ratio of GPU times with its 95% interval."""

    ratio: float
    low: float
    high: float
    rounds: int
    calls_per_round: int
    noise_floor: float
    seconds: float
    shapes: dict[str, ShapeComparison] = field(default_factory=dict)
    stopped: str = ""  # "narrow" | "max_rounds" | "time_cap"
    incumbent_hash: str | None = None  # which incumbent it was measured against

    @property
    def outcome(self) -> Verdict:
        return outcome(self.low, self.high, self.noise_floor)

    @property
    def half_width(self) -> float:
        """Half the interval's width in log terms: +/- this share around the ratio."""
        if not 0 < self.low <= self.high < math.inf:
            return math.inf
        return (math.log(self.high) - math.log(self.low)) / 2

    def shape_outcome(self, label: str) -> Verdict | None:
        shape = self.shapes.get(label)
        return None if shape is None else outcome(shape.low, shape.high, self.noise_floor)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Comparison:
        """From ``to_dict``'s form (a worker's report, a journal line) or a stored
        record's summary of it (no seconds, no shapes); the outcome is derived again
        here, never read."""
        data = {"seconds": 0.0, **data}
        names = {f.name for f in fields(cls)} - {"shapes"}
        shape_names = {f.name for f in fields(ShapeComparison)}
        shapes = {str(k): ShapeComparison(**{n: float(v[n]) for n in shape_names})
                  for k, v in (data.get("shapes") or {}).items()}
        return cls(**{k: v for k, v in data.items() if k in names}, shapes=shapes)


def from_rounds(rounds: Sequence[float], per_shape: Mapping[str, Sequence[float]],
                times: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                host: Mapping[str, tuple[float, float]], *, calls: int, seconds: float,
                stopped: str, noise_floor: float = NOISE_FLOOR) -> Comparison:
    """The comparison from paired rounds: ``rounds`` the weighted log ratio of each round
    (log incumbent over candidate), ``per_shape`` each shape's log ratio by round,
    ``times`` each shape's (candidate, incumbent) GPU ms samples, ``host`` each shape's
    (candidate, incumbent) host ms of one call."""
    mean, half = mean_interval(rounds)
    shapes = {}
    for label, logs in per_shape.items():
        m, h = mean_interval(logs)
        cand, inc = times[label]
        shapes[label] = ShapeComparison(
            ratio=math.exp(m), low=math.exp(m - h), high=math.exp(m + h),
            candidate_ms=statistics.median(cand), candidate_iqr_ms=iqr(cand),
            incumbent_ms=statistics.median(inc), candidate_host_ms=host[label][0],
            incumbent_host_ms=host[label][1])
    return Comparison(ratio=math.exp(mean), low=math.exp(mean - half),
                      high=math.exp(mean + half), rounds=len(rounds), calls_per_round=calls,
                      noise_floor=noise_floor, seconds=round(seconds, 3), shapes=shapes,
                      stopped=stopped)


def iqr(samples: Sequence[float]) -> float:
    q = statistics.quantiles(samples, n=4) if len(samples) > 1 else [samples[0]] * 3
    return q[2] - q[0]
