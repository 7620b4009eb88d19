"""The verdict rule (kernels/shared/comparison.py): one place, the same answer at every door."""

from __future__ import annotations

import math

import pytest

from kernelkb.kernels.shared import comparison as rule
from kernelkb.kernels.shared.vocabulary import Verdict


@pytest.mark.parametrize(("low", "high", "expected"), [
    (1.02, 1.10, Verdict.improved),  # the whole interval above 1 + floor
    (1.005, 1.10, Verdict.neutral),  # reaches into the floor
    (0.90, 0.98, Verdict.regressed),  # the whole interval below 1 / (1 + floor)
    (0.90, 0.995, Verdict.neutral),
    (0.0, math.inf, Verdict.neutral),  # one round: no interval at all
])
def test_an_interval_is_a_verdict_only_when_it_clears_the_floor(low, high, expected) -> None:
    assert rule.outcome(low, high) is expected


@pytest.mark.parametrize(("kind", "stage", "expected"), [
    ("wrong_result", "correctness", Verdict.incorrect),
    ("cheat_timer", "performance", Verdict.incorrect),
    ("bias", "correctness", Verdict.incorrect),
    ("timeout", "correctness", Verdict.failed),  # out of time says nothing of the numbers
    ("out_of_memory", "run", Verdict.failed),
    ("compile_error", "compile", Verdict.failed),
])
def test_a_failure_is_incorrect_only_when_the_numbers_were_wrong(kind, stage, expected) -> None:
    assert rule.failure_verdict(kind, stage) is expected


def test_paired_rounds_give_the_ratio_and_its_interval() -> None:
    logs = [math.log(1.2) + d for d in (-0.01, 0.0, 0.01, 0.0)]
    found = rule.from_rounds(logs, {"a": logs}, {"a": ([1.0] * 4, [1.2] * 4)}, {"a": (0.01, 0.01)},
                             calls=5, seconds=0.5, stopped="narrow")
    assert found.ratio == pytest.approx(1.2)
    assert found.low < 1.2 < found.high and found.outcome is Verdict.improved
    assert found.shape_outcome("a") is Verdict.improved and found.shape_outcome("b") is None
    assert 0 < found.half_width < 0.02


def test_the_outcome_is_derived_again_never_read_from_a_report() -> None:
    forged = {"ratio": 1.0, "low": 0.99, "high": 1.01, "rounds": 8, "calls_per_round": 5,
              "noise_floor": 0.01, "seconds": 1.0, "outcome": "improved", "shapes": {}}
    back = rule.Comparison.from_dict(forged)
    assert back.outcome is Verdict.neutral
    assert rule.Comparison.from_dict(back.to_dict()) == back
