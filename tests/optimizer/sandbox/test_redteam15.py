"""Red team 15 (tests/bad_kernels/REDTEAM15.md): held-out plants against the far-rows lap,
written from the docs alone. Each keeps a 32-bit offset product where the lap's one layout
per input and dimension does not reach; its narrow copy (the product kept in 16 or 20
bits) passed the lap on the CPU. The rule over the compiled IR (narrow_addresses.py)
refuses all of them on the GPU, on whichever path they take; the heads one the lap
refused in its narrow form too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

BAD = Path(__file__).parents[2] / "bad_kernels"

PAST_THE_FAR_ROWS_LAP = [
    ("softmax_few_rows_int32", "softmax", "a 1-3 row path: the lap lays out 4 or more"),
    ("softmax_long_rows_numel", "softmax", "a long-row path: one shape per dimension"),
    ("softmax_output_halves", "softmax", "the output's offsets: only inputs are laid out"),
    ("attention_seq_major_cache", "attention", "a cache the op writes is never laid out"),
    ("matmul_transposed_weight_cols", "matmul", "columns are never laid out far apart"),
    ("softmax_rows_tile_relative", "softmax", "offsets relative to a program's base"),
]


def _judged(plant: str, task: str):
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, (BAD / f"redteam15_{plant}.py").read_text(), shapes="auto",
                    seeds=1, timeout_s=900)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("plant", "task", "why"), [
    pytest.param(p, t, w, id=p) for p, t, w in PAST_THE_FAR_ROWS_LAP])
def test_offsets_that_wrap_past_the_far_rows_lap_are_refused_on_the_gpu(
        plant: str, task: str, why: str) -> None:
    result = _judged(plant, task)
    assert not result.ok, f"passed the judge: {why}"
    assert result.error_kind == "compile_error", result.text
    assert "32-bit product" in (result.error_message or ""), result.error_message


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_int32_offsets_across_heads_are_refused_on_far_rows() -> None:
    """The heads dimension is a leading one: laid out far, its 32-bit offsets wrap (the
    IR rule, which runs first, refuses it at compile)."""
    result = _judged("rope_heads_int32", "rope")
    message = result.error_message or ""
    assert not result.ok and ("far rows" in message or "32-bit product" in message), \
        result.text
