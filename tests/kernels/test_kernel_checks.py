"""The shared kernel assertions must fail loudly and say where: test them on known data."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import assert_task_close, assert_verbose_allclose, relative_bias

from kernelkb.kernels.discovery import get_task


def test_close_tensors_pass():
    x = torch.linspace(-1, 1, 100)
    assert_verbose_allclose(x + 1e-7, x, atol=1e-6, rtol=0)


def test_report_names_count_and_first_indices():
    expected = torch.zeros(4, 5)
    actual = expected.clone()
    actual[1, 2] = 0.5
    actual[3, 4] = -2.0
    with pytest.raises(AssertionError) as info:
        assert_verbose_allclose(actual, expected, atol=1e-3, rtol=0, label="demo")
    text = str(info.value)
    assert "demo: 2 of 20 elements differ" in text
    assert "(1, 2): 0.5 vs 0" in text and "(3, 4): -2 vs 0" in text
    assert "max abs err 2" in text


def test_nan_is_a_mismatch_but_matching_nan_is_not():
    expected = torch.tensor([1.0, float("nan")])
    assert_verbose_allclose(expected.clone(), expected, atol=0, rtol=0)
    with pytest.raises(AssertionError, match="1 of 2"):
        assert_verbose_allclose(torch.tensor([float("nan")] * 2), expected, atol=1, rtol=1)


def test_shape_mismatch_is_reported():
    with pytest.raises(AssertionError, match=r"shape \(3,\) != \(4,\)"):
        assert_verbose_allclose(torch.zeros(3), torch.zeros(4), atol=1, rtol=1)


def test_systematic_bias_is_caught_even_within_tolerance():
    task = get_task("softmax")
    tol = task.tolerances["float32"]
    expected = torch.full((1000,), 0.5)
    drifted = expected + 0.9 * (tol.atol + tol.rtol * 0.5)  # inside elementwise, all one way
    assert_verbose_allclose(drifted, expected, atol=tol.atol, rtol=tol.rtol)
    assert relative_bias(drifted, expected) > tol.max_bias
    with pytest.raises(AssertionError, match="systematic bias"):
        assert_task_close(task, "float32", drifted, expected)


def test_tuple_outputs_are_checked_pairwise():
    task = get_task("softmax")
    good = torch.ones(3)
    assert_task_close(task, "float32", (good, good), (good.clone(), good.clone()))
    with pytest.raises(AssertionError, match="output 1"):
        assert_task_close(task, "float32", (good, good * 2), (good, good), label="pair")
