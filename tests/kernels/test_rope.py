"""The RoPE task: naive kernel vs reference, every search-space point, render contract,
and the accuracy of both cos/sin paths at large positions (past the cached table)."""

from __future__ import annotations

import pytest
import torch
from kernel_checks import assert_task_close, candidate_for, check_config, naive_cases

from kernelkb.kernels.discovery import get_task

TASK = get_task("rope")
SPACE = list(TASK.space())
# Every point must pass on: one token with one 2-wide head, and odd q / kv head counts
# with a non-power-of-two head_dim (partial head blocks, masked frequency lanes).
# fp32 has the tightest tolerance (the strongest check of the math), fp16 checks the casts.
SPACE_CASES = (((1, 1, 1, 1, 2), "float16"), ((2, 5, 7, 3, 80), "float32"))


@pytest.mark.parametrize(("shape", "dtype"), naive_cases(TASK), ids=str)
def test_naive_kernel_matches_reference(shape, dtype, seed, device):
    check_config(TASK, None, shape, dtype, seed=seed, device=device)


@pytest.mark.parametrize("config", SPACE, ids=lambda c: "-".join(map(str, c.values())))
def test_every_space_point_passes_on_small_edge_shapes(config, seed, device):
    for shape, dtype in SPACE_CASES:
        check_config(TASK, config, shape, dtype, seed=seed, device=device)


@pytest.mark.parametrize("table", [False, True])
def test_large_positions_keep_fp32_accuracy(table, seed, device):
    """Positions past the cached table (4096 rows here) and far beyond a context length:
    the table path falls back to the in-kernel path, which must stay fp32-accurate."""
    q, k, _ = TASK.make_inputs((1, 6, 3, 1, 128), torch.float32, seed, device)
    positions = torch.tensor([[0, 4095, 4096, 8191, 100_000, 1_000_000]], dtype=torch.int32,
                             device=device)
    module = candidate_for(TASK, {"PRECOMPUTED_TABLE": table})
    result = module.run(q, k, positions)
    assert_task_close(TASK, "float32", result, TASK.reference(q, k, positions),
                      label=f"table={table}")




def test_reference_is_rotate_half_and_norm_preserving(seed):
    q, k, positions = TASK.make_inputs((2, 3, 2, 1, 8), torch.float64, seed, "cpu")
    q_out, _ = TASK.reference(q, k, positions)
    assert torch.allclose(q_out.norm(dim=-1), q.norm(dim=-1))  # a rotation
    zero = torch.zeros_like(positions)
    assert torch.equal(TASK.reference(q, k, zero)[0], q)  # position 0 is the identity
    # rotate-half pairs lane i with lane i + head_dim/2; lane 0 turns at inv_freq = 1
    one = torch.ones_like(positions)
    c, s = torch.cos(torch.tensor(1.0, dtype=torch.float64)), torch.sin(torch.tensor(1.0))
    expected_lane0 = q[..., 0] * c - q[..., 4] * s.double()
    assert torch.allclose(TASK.reference(q, k, one)[0][..., 0], expected_lane0)


def test_bad_inputs_get_a_clear_error(device):
    module = candidate_for(TASK)
    q = torch.zeros(1, 2, 4, 8, device=device)
    with pytest.raises(ValueError, match="does not match"):
        module.run(q, torch.zeros(1, 3, 2, 8, device=device), torch.zeros(1, 2, device=device))
    with pytest.raises(ValueError, match="positions"):
        module.run(q, torch.zeros(1, 2, 2, 8, device=device), torch.zeros(2, device=device))
