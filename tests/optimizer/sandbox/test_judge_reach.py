"""The judge's reach past the evaluation's own request: every other dtype the task
declares, a shape past the largest asked, and the task's scalar arguments drawn over
their legal range. Each plant here is honest on everything an evaluation asked and wrong
(or PyTorch) only past it; each runs on the smallest shapes that show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate

BAD = Path(__file__).parents[2] / "bad_kernels"


def test_a_kernel_wrong_only_in_another_dtype_fails_in_that_dtype() -> None:
    source = (BAD / "redteam3_dtype_only_checked.py").read_text()
    result = evaluate("softmax", source, shapes=[(4, 128)], seeds=1)
    assert result.error_kind == "wrong_result", result.text
    assert "[float32]" in result.error_message and "in float32" in result.error_message
    assert result.judge["other_dtypes"] == {"shape": "rows=4,cols=128",
                                            "dtypes": ["bfloat16", "float32"]}
    # asked in float32 itself, the worker's own checks see it
    asked = evaluate("softmax", source, shapes=[(4, 128)], seeds=1, dtype="float32")
    assert asked.error_kind == "wrong_result" and "judge" not in asked.error_message


@pytest.mark.slow  # the big shape in the interpreter (~30 s on 2 cores)
def test_a_kernel_lazy_past_the_largest_asked_shape_fails_on_the_big_shape() -> None:
    """The held-out plant keyed on 2**21 elements, re-keyed on the one shape asked: the
    shape past it (1.5-2x its bytes on the CPU), its rows under every condition of the
    values, meets large logits on the lazy path (no row max: exp overflows)."""
    source = (BAD / "redteam3_big_input_lazy.py").read_text()
    assert source.count("x.numel() <= 2 ** 21") == 1, "the planted line moved"
    source = source.replace("x.numel() <= 2 ** 21", "x.numel() <= 16 * 1000")
    result = evaluate("softmax", source, shapes=[(16, 1000)], seeds=1)
    assert result.error_kind == "wrong_result", result.text
    assert "past the largest asked" in result.error_message, result.error_message
    assert "[rows of every condition]" in result.error_message
    big = get_task("softmax").parse_shape(result.judge["big_shape"])
    assert 1.5 * 16 * 1000 <= big[0] * big[1] <= 2 * 16 * 1000
    honest = evaluate("softmax", get_task("softmax").template, shapes=[(16, 1000)], seeds=1)
    assert honest.ok, honest.text
    assert honest.judge["big_shape"] and "big shape" in honest.judge["laps_s"]


def test_a_kernel_that_ignores_eps_fails_on_a_drawn_eps() -> None:
    """RMSNorm's kernel with eps fixed at the default whatever run() is given: right on
    every call that passes the default, wrong on a drawn eps over a quiet row."""
    task = get_task("rmsnorm")
    line = ("    rmsnorm_kernel[grid](out, x, weight, n_rows, n_cols, x.stride(0), "
            "out.stride(0), eps,")
    assert task.template.count(line) == 1, "the planted line moved"
    source = task.template.replace(line, line.replace(", eps,", ", 1e-6,"))
    plain = evaluate("rmsnorm", source, shapes=[(8, 4096)], seeds=1, conditions=False)
    assert plain.ok, plain.text  # the calls with the default see nothing
    result = evaluate("rmsnorm", source, shapes=[(8, 4096)], seeds=1)
    assert result.error_kind in ("wrong_result", "bias"), result.text
    assert "[other scalar arguments]" in result.error_message, result.error_message


def test_the_eps_flag_plant_is_seen_taking_pytorch() -> None:
    source = (BAD / "redteam4_rmsnorm_eps_flag.py").read_text()
    result = evaluate("rmsnorm", source, shapes=[(8, 4096)], seeds=1)
    assert result.error_kind == "torch_compute", result.text
    assert "[other scalar arguments]" in result.error_message


def test_bfloat16_is_left_to_the_gpu_for_a_dot_under_the_interpreter() -> None:
    """The interpreter's bfloat16 dot is wrong (numpy has no bfloat16): an honest matmul
    is not failed for it; its float16 and the other checks still run."""
    task = get_task("matmul")
    result = evaluate("matmul", task.template, shapes=[task.cpu_shapes[0]], seeds=1)
    assert result.ok, result.text
    assert result.judge["other_dtypes_skipped"] == {"bfloat16": "the interpreter's dot"}
    assert result.judge["big_shape"]
