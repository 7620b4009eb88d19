"""Verdicts against the parent, with the noise threshold taken from the timing spread."""

from __future__ import annotations

import pytest

from kernelkb.kernels.shared.vocabulary import Verdict
from kernelkb.optimizer.sandbox import EvalResult
from kernelkb.optimizer.verdict import judge, noise_threshold


def timed(ms: float, iqr: float = 0.0) -> EvalResult:
    return EvalResult(ok=True, stage="performance", task_name="softmax", dtype="float16",
                      shape_set="auto", timing_available=True, time_ms=ms,
                      timings={"rows=1,cols=8": (ms, iqr)})


def test_noise_comes_from_the_spread_with_a_floor() -> None:
    assert noise_threshold(timed(1.0), timed(1.0)) == pytest.approx(0.02)
    assert noise_threshold(timed(1.0, 0.05), timed(1.0, 0.03)) == pytest.approx(0.08)


def test_a_noisy_parent_cannot_hide_a_clear_win() -> None:
    """Seen on the H200: a parent with IQR above its median made a 1.5x win 'neutral'."""
    parent, child = timed(1.0, 1.3), timed(0.65, 0.01)
    noise = noise_threshold(child, parent)
    assert noise == pytest.approx(0.10)
    assert judge(child, parent, claimed_gain=True, noise=noise) is Verdict.improved


@pytest.mark.parametrize(("child_ms", "claimed", "expected"), [
    (0.8, False, Verdict.improved),
    (1.2, False, Verdict.regressed),
    (0.99, False, Verdict.neutral),
    (0.99, True, Verdict.invalid),  # claims a gain the timing does not show
])
def test_timed_verdicts(child_ms: float, claimed: bool, expected: Verdict) -> None:
    parent = timed(1.0)
    child = timed(child_ms)
    assert judge(child, parent, claimed_gain=claimed,
                 noise=noise_threshold(child, parent)) is expected


def test_failures_and_wrong_results() -> None:
    wrong = EvalResult(ok=False, stage="correctness", task_name="softmax", dtype="float16",
                       shape_set="auto", error_kind="wrong_result")
    crash = EvalResult(ok=False, stage="compile", task_name="softmax", dtype="float16",
                       shape_set="auto", error_kind="compile_error")
    assert judge(wrong, timed(1.0), claimed_gain=True, noise=0.02) is Verdict.incorrect
    assert judge(crash, timed(1.0), claimed_gain=True, noise=0.02) is Verdict.failed


def test_correct_but_untimed_is_neutral() -> None:
    cpu = EvalResult(ok=True, stage="correctness", task_name="softmax", dtype="float16",
                     shape_set="auto")
    assert judge(cpu, cpu, claimed_gain=True, noise=0.02) is Verdict.neutral


def test_a_parent_retimed_beside_the_child_is_what_the_child_is_judged_against() -> None:
    """The worker re-times the parent where the child looked over 10x faster (see
    optimizer/sandbox/timing.py); its earlier, slow figure must not make a level child a
    win. fill_timing is the evaluator's own layer (the replay uses it too)."""
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.sandbox.evaluator import fill_timing

    task, shape = get_task("softmax"), (1024, 4096)
    label = task.shape_label(shape)
    stale_parent = EvalResult(ok=True, stage="performance", task_name="softmax",
                              dtype="float16", shape_set="auto", timing_available=True,
                              time_ms=0.5, timings={label: (0.5, 0.0)})
    verdicts = {}
    for retimed in ({}, {label: 0.049}):
        child = EvalResult(ok=True, stage="correctness", task_name="softmax",
                           dtype="float16", shape_set="auto")
        data = {"timings": {label: [0.0485, 0.0]}, "parent_retimed": retimed}
        fill_timing(child, task, data, [shape], stale_parent, None)
        verdicts[bool(retimed)] = judge(child, stale_parent, claimed_gain=False,
                                        noise=noise_threshold(child, stale_parent))
    assert verdicts == {False: Verdict.improved, True: Verdict.neutral}
    assert child.parent_ms == pytest.approx(0.049) and child.parent_retimed == {label: 0.5}
