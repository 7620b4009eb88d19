"""The RMSNorm task: naive kernel vs reference, every search-space point, render contract."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import check_config, naive_cases

from kernelkb.kernels.discovery import get_task

TASK = get_task("rmsnorm")
SPACE = list(TASK.space())
# Every point must pass on: a single element, and three rows of a non-power-of-two width
# that is one partial chunk for BLOCK_SIZE=4096 and two chunks for 1024 (and leaves a
# ROWS_PER_PROGRAM=4 program with a tail, and persistent programs with no row at all).
SPACE_SHAPES = ((1, 1), (3, 1500))


@pytest.mark.parametrize(("shape", "dtype"), naive_cases(TASK), ids=str)
def test_naive_kernel_matches_reference(shape, dtype, seed, device):
    check_config(TASK, None, shape, dtype, seed=seed, device=device)


@pytest.mark.parametrize("config", SPACE, ids=lambda c: "-".join(map(str, c.values())))
def test_every_space_point_passes_on_small_edge_shapes(config, seed, device):
    for shape in SPACE_SHAPES:
        for dtype in TASK.dtypes:
            check_config(TASK, config, shape, dtype, seed=seed, device=device)




def test_reference_normalises_rows_to_unit_rms(seed):
    x, _ = TASK.make_inputs((4, 256), torch.float32, seed, "cpu")
    y = TASK.reference(x, torch.ones(256))
    assert torch.allclose(y.pow(2).mean(-1), torch.ones(4), atol=1e-4)


def test_illegal_combination_is_refused():
    with pytest.raises(ValueError, match="PERSISTENT"):
        TASK.render({"PERSISTENT": True, "BLOCK_SIZE": 1024})
