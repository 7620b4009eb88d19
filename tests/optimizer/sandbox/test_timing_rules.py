"""The selection rules of optimizer/sandbox/timing.py, with do_bench's passes replaced by
a script of figures (the GPU side runs in test_gpu.py on the H200)."""

from __future__ import annotations

import pytest

from kernelkb.optimizer.sandbox import timing


@pytest.fixture
def passes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, float]]:
    """Figures the next do_bench passes return, in order; consumed as they are asked."""
    script: list[tuple[float, float]] = []
    monkeypatch.setattr(timing, "_quantiles", lambda call, rep_ms: script.pop(0))
    return script


def test_a_launch_bound_figure_keeps_the_lowest_of_three_passes(passes) -> None:
    passes += [(0.025, 0.004), (0.008, 0.001), (0.012, 0.002)]
    assert timing.measure(lambda: None) == (0.008, 0.001)
    assert not passes


def test_a_kernel_bound_figure_is_timed_once(passes) -> None:
    passes += [(0.5, 0.01), (0.1, 0.01)]
    assert timing.measure(lambda: None) == (0.5, 0.01)
    assert passes == [(0.1, 0.01)]  # the second pass was never asked for


def test_a_wall_clock_rule_must_fire_on_every_fresh_measurement() -> None:
    """A moment of another process's GPU work stretches host clocks once; work a candidate
    leaves running is there every time."""
    spike = iter([True, False, True])
    assert not timing._persists(lambda: next(spike))
    assert timing._persists(lambda: True)
    calls = []
    assert not timing._persists(lambda: calls.append(1) or False)
    assert len(calls) == 1  # stops at the first measurement that does not fire
