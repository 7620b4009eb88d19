"""The SwiGLU task: naive kernel vs reference, every search-space point, render contract."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import candidate_for, check_config, naive_cases

from kernelkb.kernels.discovery import get_task

TASK = get_task("swiglu")
SPACE = list(TASK.space())
# Every point must pass on: a row shorter than any block (masked), a non-power-of-two
# width (partial block at each row end in 2-D), and a size both blocks divide (the
# mask-free even specialisation actually runs).
SPACE_SHAPES = ((1, 7), (3, 1000), (4, 4096))


@pytest.mark.parametrize(("shape", "dtype"), naive_cases(TASK), ids=str)
def test_naive_kernel_matches_reference(shape, dtype, seed, device):
    check_config(TASK, None, shape, dtype, seed=seed, device=device)


@pytest.mark.parametrize("config", SPACE, ids=lambda c: "-".join(map(str, c.values())))
def test_every_space_point_passes_on_small_edge_shapes(config, seed, device):
    for shape in SPACE_SHAPES:
        for dtype in ("float16", "bfloat16"):  # fp32 is the same code, checked by the naive test
            check_config(TASK, config, shape, dtype, seed=seed, device=device)




def test_reference_is_silu_times_up():
    gate = torch.tensor([[0.0, 1.0, -30.0]])
    up = torch.tensor([[5.0, 2.0, 1.0]])
    expected = torch.tensor([[0.0, 2.0 / (1.0 + torch.exp(torch.tensor(-1.0)).item()), 0.0]])
    assert torch.allclose(TASK.reference(gate, up), expected, atol=1e-6)


def test_mismatched_inputs_get_a_clear_error(device):
    module = candidate_for(TASK)
    with pytest.raises(ValueError, match="differ"):
        module.run(torch.zeros(2, 3, device=device), torch.zeros(2, 4, device=device))
