"""The softmax task: naive kernel vs reference, every search-space point, render contract."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import check_config, naive_cases

from kernelkb.kernels.discovery import get_task

TASK = get_task("softmax")
SPACE = list(TASK.space())
# Small edge shapes every point of the space must pass: a single element, a row shorter
# than any block, and a non-power-of-two row longer than the smallest chunk.
SPACE_SHAPES = ((1, 1), (3, 1823))


@pytest.mark.parametrize(("shape", "dtype"), naive_cases(TASK), ids=str)
def test_naive_kernel_matches_reference(shape, dtype, seed, device):
    check_config(TASK, None, shape, dtype, seed=seed, device=device)


@pytest.mark.parametrize("config", SPACE, ids=lambda c: "-".join(map(str, c.values())))
def test_every_space_point_passes_on_small_edge_shapes(config, seed, device):
    for shape in SPACE_SHAPES:
        check_config(TASK, config, shape, "float16", seed=seed, device=device)



def test_reference_rows_sum_to_one(seed):
    (x,) = TASK.make_inputs((4, 33), torch.float32, seed, "cpu")
    assert torch.allclose(TASK.reference(x).sum(-1), torch.ones(4), atol=1e-6)
