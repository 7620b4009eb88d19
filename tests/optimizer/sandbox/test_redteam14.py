"""Red team 14 (tests/bad_kernels/REDTEAM14.md): held-out plants against the wide-shape
check and the launch plan's key, written from the docs alone. The fused-layout guess is
refused on the CPU; the offsets that wrap only where the one wide shape a task declares
does not reach are refused on a GPU by the far-rows check (kernels/far_rows.py: the
interpreter cannot hold the storage; its CPU form is test_far_rows.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from redteam import judged_as_users_get_it

BAD = Path(__file__).parents[2] / "bad_kernels"


@pytest.mark.slow
def test_a_fused_layout_taken_from_strides_alone_is_refused() -> None:
    """The plant reads ``up`` at ``gate + cols`` wherever both rows are 2 * cols apart.
    "fused blocks apart" gives the halves that stride and other neighbours: the read
    leaves the storage on the last row (passed the judge before the condition)."""
    judged_as_users_get_it("swiglu", (BAD / "redteam14_swiglu_fused_guess.py").read_text(),
                           "illegal_memory_access")


# each wraps where the one wide shape a task declares (contiguous, 2-D, past 2**31 and
# under 2**32, one tensor wide) does not reach; its rows laid far apart reach there
PAST_THE_WIDE_SHAPE = [
    ("softmax_two_launches", "softmax", "wraps past 2**32 elements only"),
    ("rmsnorm_int32_batch_seq", "rmsnorm", "wraps in the (batch, seq, hidden) form only"),
    ("swiglu_numel_int64", "swiglu", "wraps where a view's reach passes its element count"),
    ("matmul_int32_a_offsets", "matmul", "wraps on A, which the wide shape keeps small"),
    ("rope_int32_k_offsets", "rope", "wraps on k, which GQA's wide shape keeps small"),
]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("plant", "task", "why"), PAST_THE_WIDE_SHAPE,
                         ids=[p for p, _, _ in PAST_THE_WIDE_SHAPE])
def test_offsets_that_wrap_past_the_wide_shape_are_refused_on_far_rows(
        plant: str, task: str, why: str) -> None:
    from kernelkb.optimizer.sandbox import evaluate

    result = evaluate(task, (BAD / f"redteam14_{plant}.py").read_text(), shapes="auto",
                      seeds=1, timeout_s=900)
    assert not result.ok, f"passed the judge: {why}"
    # the IR rule (narrow_addresses.py) refuses a 32-bit product at compile, before the lap
    message = result.error_message or ""
    assert "far rows" in message or "32-bit product" in message, message
