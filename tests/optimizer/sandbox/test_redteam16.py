"""Red team 16 (tests/bad_kernels/REDTEAM16.md): held-out plants against the rule over the
compiled IR (narrow_addresses.py), written from the docs alone. Each keeps a 32-bit
address offset that wraps past 2**31 elements, built where the rule does not look (by
adding round a loop, or as a product with a specialised constant) and on an input or
path the wide shape and the far-rows lap do not lay out. Their narrow copies passed the
rule and the laps on the CPU. The two that carry their offset round a loop are refused
since (a 32-bit iteration argument that feeds an address may wrap), and so are the four
built as a product with a constant: a 32-bit product feeding an address must have a
bound under 2**31 proved from its factors (constants, ranges, the grid's y and z ids,
each 32-bit value under 2**31), which ``rows * K_DIM`` and ``pid * BLOCK`` have not. On
the CPU in test_narrow_addresses.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

BAD = Path(__file__).parents[2] / "bad_kernels"

CARRIED = [("softmax_decode_carried", "softmax"), ("attention_carried_block_base", "attention")]
CONSTANT_PRODUCTS = [
    ("matmul_constexpr_k", "matmul", "A's rows times a specialised K"),
    ("matmul_nt_constexpr_k", "matmul", "a transposed weight's columns times a constant"),
    ("rope_k_constexpr_row", "rope", "k's tokens times a specialised row length"),
    ("swiglu_flat_halves", "swiglu", "pid * BLOCK in 32 bits, launched in two halves"),
]


def _judged(plant: str, task: str):
    from kernelkb.optimizer.sandbox import evaluate

    return evaluate(task, (BAD / f"redteam16_{plant}.py").read_text(), shapes="auto",
                    seeds=1, timeout_s=900)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("plant", "task"), CARRIED, ids=[p for p, _ in CARRIED])
def test_offsets_carried_round_a_loop_are_refused_at_compile_on_the_gpu(plant: str, task: str
                                                                        ) -> None:
    result = _judged(plant, task)
    assert not result.ok and result.error_kind == "compile_error", result.text
    # the first finding may be another 32-bit offset of the plant's (the attention one
    # keeps the old template's 32-bit rows in its cache-write kernel)
    assert "32-bit" in (result.error_message or ""), result.error_message


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("plant", "task", "why"), CONSTANT_PRODUCTS,
                         ids=[p for p, _, _ in CONSTANT_PRODUCTS])
def test_products_with_a_constant_are_refused_at_compile_on_the_gpu(plant: str, task: str,
                                                                    why: str) -> None:
    result = _judged(plant, task)
    assert not result.ok and result.error_kind == "compile_error", f"{why}: {result.text}"
    assert "a run-time value times a constant" in (result.error_message or ""), \
        result.error_message
