"""The interleaved comparison's statistics, on a simulated GPU clock (the CPU has none).

The simulated clock gives each call a time that drifts (the GPU warming, a neighbour's
load) and jitters (log-normal), as the H200 does; the comparison must call A/A neutral,
see a 10% difference every time, and say how sure it is.
"""

from __future__ import annotations

import math
import random

import pytest

from kernelkb.kernels.shared import comparison as rule
from kernelkb.optimizer.sandbox import compare


class DriftingClock:
    """GPU time = base x drift(t) x jitter; drift moves the whole machine by up to 2x."""

    def __init__(self, seed: int, jitter: float = 0.03, drift: float = 1.0) -> None:
        self.rng = random.Random(seed)
        self.jitter, self.drift, self.t = jitter, drift, 0

    def host_ms(self, call, calls=8):
        return 0.01

    def queue_round(self, calls):
        out = []
        for call, _ in calls:
            self.t += 1
            out.append(call() * (1 + self.drift * 0.5 * (1 + math.sin(self.t / 150))) *
                       math.exp(self.rng.gauss(0, self.jitter)))
        return out

    def read(self, handles):
        return list(handles)

    def samples(self, call, calls, host_ms):
        return self.read(self.queue_round([(call, host_ms)] * calls))


def kernel(ms: float):
    return lambda: ms


def run(candidate_ms: dict, incumbent_ms: dict, seed: int, **kw) -> compare.Comparison:
    return compare.compare({k: kernel(v) for k, v in candidate_ms.items()},
                           {k: kernel(v) for k, v in incumbent_ms.items()},
                           {k: 1.0 for k in candidate_ms}, DriftingClock(seed, **kw))


SHAPES = {"rows=1": 0.005, "rows=4096": 0.2, "rows=32768": 1.5}


def test_a_kernel_against_itself_is_neutral_under_drift() -> None:
    outcomes = [run(SHAPES, SHAPES, seed).outcome for seed in range(200)]
    false = sum(o != "neutral" for o in outcomes)
    assert false <= 0.05 * len(outcomes), f"{false} of 200 A/A verdicts were not neutral"


@pytest.mark.parametrize("slower", [1.1, 1.05])
def test_a_slower_kernel_is_seen_every_time(slower: float) -> None:
    worse = {k: v * slower for k, v in SHAPES.items()}
    for seed in range(50):
        found = run(worse, SHAPES, seed)
        assert found.outcome == "regressed", (seed, found)
        assert found.low < 1 / slower < found.high or abs(found.ratio * slower - 1) < 0.02
        assert run(SHAPES, worse, seed).outcome == "improved"


def test_the_interval_narrows_to_the_target_or_says_it_stopped_at_the_cap() -> None:
    calm = run(SHAPES, SHAPES, 1, jitter=0.01)
    assert calm.stopped == "narrow" and calm.rounds >= compare.MIN_ROUNDS
    assert math.log(calm.high / calm.low) / 2 <= compare.TARGET_HALF_WIDTH + 1e-9
    noisy = run(SHAPES, SHAPES, 1, jitter=0.6)
    assert noisy.rounds > calm.rounds  # noisier clocks need more rounds


def test_one_shape_regressing_is_named_while_the_objective_improves() -> None:
    candidate = {"rows=1": 0.0075, "rows=4096": 0.1, "rows=32768": 0.75}
    found = run(candidate, SHAPES, 3)
    assert found.outcome == "improved"
    assert found.shapes["rows=1"].high < 1.0 and found.shapes["rows=4096"].low > 1.5


def test_weights_decide_the_objective() -> None:
    candidate = {"a": 0.5, "b": 2.0}
    incumbent = {"a": 1.0, "b": 1.0}
    calls = {k: kernel(v) for k, v in candidate.items()}
    inc = {k: kernel(v) for k, v in incumbent.items()}
    heavy_a = compare.compare(calls, inc, {"a": 9.0, "b": 1.0}, DriftingClock(0))
    heavy_b = compare.compare(calls, inc, {"a": 1.0, "b": 9.0}, DriftingClock(0))
    assert heavy_a.outcome == "improved" and heavy_b.outcome == "regressed"


def test_student_t_quantiles() -> None:
    assert rule.t975(1) == pytest.approx(12.706)
    assert rule.t975(30) == pytest.approx(2.042)
    assert 1.96 < rule.t975(200) < 1.98 and rule.t975(0) == math.inf
    mean, half = rule.mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / math.sqrt(3))
