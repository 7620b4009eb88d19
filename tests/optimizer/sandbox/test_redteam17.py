"""Red team 17 (tests/bad_kernels/REDTEAM17.md): held-out plants against the rule over the
compiled IR (narrow_addresses.py), written from the docs alone after it bounded products.
Each builds a 32-bit address offset `k * stride` without a multiply the rule read: by
unrolled additions, a prefix sum, a `while` loop, an atomic work cursor. The rule now
bounds every 32-bit value reaching an address (sums, scans and reductions, every loop's
carried values, atomics' old values as loads), so each is refused at compile; on the CPU
in test_narrow_addresses.py, here on a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

BAD = Path(__file__).parents[2] / "bad_kernels"

PLANTS = [("softmax_rows_unrolled", "softmax"), ("rmsnorm_tile_rows_cumsum", "rmsnorm"),
          ("matmul_while_weight_base", "matmul"), ("swiglu_atomic_cursor", "swiglu")]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("plant", "task"), PLANTS, ids=[p for p, _ in PLANTS])
def test_offsets_built_by_adding_are_refused_at_compile_on_the_gpu(plant: str, task: str
                                                                   ) -> None:
    from kernelkb.optimizer.sandbox import evaluate

    result = evaluate(task, (BAD / f"redteam17_{plant}.py").read_text(), shapes="auto",
                      seeds=1, timeout_s=900)
    assert not result.ok and result.error_kind == "compile_error", result.text
    assert "32-bit" in (result.error_message or ""), result.error_message
