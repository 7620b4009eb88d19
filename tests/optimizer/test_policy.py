"""Stop conditions and the exploration schedule, on synthetic score sequences."""

from __future__ import annotations

import pytest

from kernelkb.optimizer.policy import Policy, PolicyConfig, StopReason


def run(policy: Policy, scores: list[float | None], spent: float = 0.0) -> int:
    """Feed scores until the policy stops; returns how many rounds it took."""
    for n, score in enumerate(scores, 1):
        policy.observe(score, spent_s=spent)
        if policy.stop_reason() is not None:
            return n
    return len(scores)


def test_patience_counts_rounds_without_improvement() -> None:
    policy = Policy(PolicyConfig(patience=3))
    policy.start(1.0)
    assert run(policy, [0.9, 0.95, 0.91, 0.92, 0.5]) == 4  # 0.9 improved, then 3 without
    assert policy.stop_reason() is StopReason.patience
    assert policy.best_score == 0.9


def test_untimed_rounds_count_as_no_improvement() -> None:
    policy = Policy(PolicyConfig(patience=2))
    policy.start(None)  # CPU: the baseline itself is untimed
    assert run(policy, [None, None, None]) == 2
    assert policy.stop_reason() is StopReason.patience


def test_gain_within_noise_is_not_an_improvement() -> None:
    policy = Policy(PolicyConfig(patience=1, min_noise=0.02))
    policy.start(1.0)
    assert not policy.observe(0.99)  # 1% faster: noise
    policy = Policy(PolicyConfig(patience=5))
    policy.start(1.0)
    assert not policy.observe(0.95, noise=0.1)  # 5% faster, but the spread is 10%
    assert policy.observe(0.8, noise=0.1)


def test_max_iters() -> None:
    policy = Policy(PolicyConfig(max_iters=4, patience=100))
    policy.start(1.0)
    assert run(policy, [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]) == 4
    assert policy.stop_reason() is StopReason.max_iters


def test_target_speedup() -> None:
    policy = Policy(PolicyConfig(target_speedup=1.5, patience=100))
    policy.start(1.0)
    assert run(policy, [0.9, 0.8, 0.66, 0.5]) == 3  # 1/0.66 = 1.52x
    assert policy.stop_reason() is StopReason.target_speedup
    assert policy.speedup == pytest.approx(1 / 0.66)


def test_budget_counts_evaluation_seconds_including_the_baseline() -> None:
    policy = Policy(PolicyConfig(budget_s=10.0, patience=100))
    policy.start(1.0, spent_s=4.0)
    assert run(policy, [0.9, 0.8, 0.7, 0.6], spent=2.5) == 3  # 4 + 3 * 2.5 >= 10
    assert policy.stop_reason() is StopReason.budget


def test_first_condition_wins_in_a_fixed_order() -> None:
    policy = Policy(PolicyConfig(max_iters=1, patience=1, budget_s=1.0))
    policy.start(1.0, spent_s=5.0)
    policy.observe(None)
    assert policy.stop_reason() is StopReason.budget  # budget is checked before the others
    policy.exhausted = True
    assert policy.stop_reason() is StopReason.exhausted


def test_every_tenth_round_explores() -> None:
    policy = Policy()
    kinds = [policy.round_kind(i) for i in range(1, 31)]
    assert [i for i, k in enumerate(kinds, 1) if k == "explore"] == [10, 20, 30]


def test_the_round_that_would_run_out_of_patience_explores() -> None:
    policy = Policy(PolicyConfig(patience=3))
    policy.start(1.0)
    kinds = []
    for iteration in range(1, 4):  # no round improves: the third would end the run
        kinds.append(policy.round_kind(iteration))
        policy.observe(1.0)
    assert kinds == ["exploit", "exploit", "explore"]
    assert policy.stop_reason() is StopReason.patience
    policy = Policy(PolicyConfig(patience=3))
    policy.start(1.0)
    policy.observe(1.0)
    policy.observe(0.5)  # improved: the window starts again
    assert policy.round_kind(3) == "exploit"
    assert Policy(PolicyConfig(patience=1)).round_kind(1) == "exploit"  # stop, not explore


@pytest.mark.parametrize("bad", [{"patience": 0}, {"target_speedup": 0.9}, {"budget_s": 0}])
def test_bad_settings_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        PolicyConfig(**bad)


def test_candidate_timeout_scales_with_the_work_and_not_with_the_budget_left() -> None:
    from types import SimpleNamespace

    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.loop import Loop, LoopOptions
    from kernelkb.optimizer.sandbox.evaluator import work_timeout_s

    loop = Loop.__new__(Loop)  # only the task, policy, options and env matter here
    loop.task = get_task("softmax")
    loop.info = SimpleNamespace(env=SimpleNamespace(arch="sm_90"))
    loop.policy = Policy(PolicyConfig(budget_s=100.0))
    loop.options = LoopOptions(dtype="float16", timeout_s=60.0, seeds=3)
    few, many = loop._timeout_s("edge"), loop._timeout_s("all")
    assert few == work_timeout_s(len(loop.task.edge_shapes), 3, on_gpu=True) > 60.0
    assert many > few  # more shapes, more time
    loop.policy.spent_s = 99.0  # the budget's end does not cut a candidate short
    assert loop._timeout_s("all") == many
    loop.options = LoopOptions(dtype="float16", timeout_s=10_000.0)
    assert loop._timeout_s("edge") == 10_000.0  # a larger limit asked for is kept
