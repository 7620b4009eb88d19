"""The matmul task: naive kernel vs reference, every search-space point, render contract.

bf16 on the CPU: Triton's interpreter does not support ``tl.dot`` on bfloat16 operands
(it multiplies the raw uint16 bit patterns, triton-lang/triton#11584), so bf16 runs only
on a GPU here; fp16 covers the same code paths on the CPU.
"""

from __future__ import annotations

import pytest
import torch
from kernel_checks import candidate_for, check_config, naive_cases

from kernelkb.kernels.discovery import get_task

TASK = get_task("matmul")
SPACE = list(TASK.space())
ON_GPU = torch.cuda.is_available()
# Edge shapes the interpreter runs in seconds: a single element, odd M/N/K that are not
# multiples of any tile, K a multiple of 64 (the EVEN_K path), and M=1 (decode).
SMALL_EDGE = ((1, 1, 1), (7, 33, 65), (19, 70, 128), (1, 300, 256))


def _skip_bf16_on_interpreter(dtype: str) -> None:
    if dtype == "bfloat16" and not ON_GPU:
        pytest.skip("interpreter: tl.dot on bf16 unsupported (triton-lang/triton#11584)")


@pytest.mark.parametrize(("shape", "dtype"), naive_cases(TASK), ids=str)
def test_naive_kernel_matches_reference(shape, dtype, seed, device):
    _skip_bf16_on_interpreter(dtype)
    check_config(TASK, None, shape, dtype, seed=seed, device=device)


@pytest.mark.parametrize("config", SPACE, ids=lambda c: "-".join(map(str, c.values())))
def test_every_space_point_passes_on_small_edge_shapes(config, seed, device):
    for shape in SMALL_EDGE:
        check_config(TASK, config, shape, "float16", seed=seed, device=device)




def test_split_k_covers_a_long_odd_k(seed, device):
    """Split-K cuts K=1000 into 4 ranges of whole BLOCK_K steps, the last one short."""
    config = {**TASK.default_config, "BLOCK_M": 16, "BLOCK_N": 64, "SPLIT_K": 4,
              "NUM_STAGES": 3}
    check_config(TASK, config, (5, 40, 1000), "float16", seed=seed, device=device)


def test_mismatched_operands_raise_a_clear_error(device):
    module = candidate_for(TASK)
    a = torch.zeros((4, 8), dtype=torch.float16, device=device)
    b = torch.zeros((9, 4), dtype=torch.float16, device=device)
    with pytest.raises(ValueError, match="A \\[M, K\\] and B \\[K, N\\]"):
        module.run(a, b)


def test_flop_and_byte_model():
    assert TASK.flops((2, 3, 4), torch.float16) == 2 * 2 * 3 * 4
    assert TASK.bytes_moved((2, 3, 4), torch.bfloat16) == (8 + 12 + 6) * 2
    assert TASK.compute_bound
