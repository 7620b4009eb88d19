"""PyTorch compute named outside a candidate's kernels, refused from the source on every
path (optimizer/sandbox/named_compute.py): every shipped kernel passes, and the plants
that take PyTorch only on an input the judge never draws are refused before they run."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox import evaluate, named_compute

PLANTS = Path(__file__).resolve().parents[2] / "bad_kernels"
# PyTorch behind a branch on an input the judge never made (red teams 7 to 9), the last
# past every list of unusual inputs: a row count past the judge's reach
UNTAKEN_BRANCHES = ("redteam9_rmsnorm_rows_past_reach", "redteam9_softmax_1d_logits",
                    "redteam9_matmul_batched_a", "redteam9_rmsnorm_channels_first",
                    "redteam9_rmsnorm_half_weight_fp32_x", "redteam8_vocab_past_lists",
                    "redteam8_scores_rank4", "redteam7_leading_dims_torch",
                    "redteam7_other_dtype_torch")

WRAPPER = '''
import math
import torch
import torch.nn.functional as F
import triton
import triton.language as tl

@triton.jit
def kernel(x_ptr, y_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    tl.store(y_ptr + tl.arange(0, N), tl.exp(x - tl.max(x, 0)) / tl.sum(x, 0))

def run(x):
    sizes = sorted([4, 2], reverse=True)
    names = ["a", "b"]
    names.sort(key=len)
    scale = math.sqrt(x.shape[-1]) + torch.finfo(x.dtype).max * 0
    x = F.pad(x.contiguous().view(-1, x.shape[-1]).to(torch.float32), (0, 0))
    y = torch.empty_like(x)
    kernel[(x.shape[0],)](x, y, triton.next_power_of_2(x.shape[-1]))
    return y
'''


@pytest.mark.parametrize("task", sorted(all_tasks()))
def test_every_point_of_every_shipped_space_passes(task: str) -> None:
    spec = get_task(task)
    for config in spec.space():
        assert named_compute.problems(spec.render(config), spec.torch_constants) == [], \
            (task, config)


def test_a_wrapper_that_allocates_lays_out_and_casts_passes() -> None:
    assert named_compute.problems((PLANTS / "_good.py").read_text()) == []
    assert named_compute.problems(WRAPPER) == []


@pytest.mark.parametrize("plant", UNTAKEN_BRANCHES)
def test_pytorch_on_a_branch_the_judge_never_takes_is_refused(plant: str) -> None:
    assert named_compute.problems((PLANTS / f"{plant}.py").read_text())


@pytest.mark.parametrize(("line", "named"), [
    ("y = torch.softmax(x, -1)", "torch.softmax"),
    ("y = F.silu(x)", "F.silu"),
    ("y = x.float().pow(2).mean(-1)", ".pow()"),
    ("y = x @ x.t()", "(@)"),
    ("y = torch.ops.aten.mm.default(x, x)", "torch.ops.aten.mm"),
    ("y = x.sum(dim=0)", ".sum()"),
    ("y = x.div_(2)", ".div_()"),
    ("y = torch.nn.Linear(4, 4)(x)", "torch.nn.Linear"),
    ("y = F.normalize(x)", "F.normalize"),
])
def test_each_spelling_of_pytorch_compute_is_named(line: str, named: str) -> None:
    source = WRAPPER.replace("    return y", f"    {line}\n    return y")
    found = named_compute.problems(source)
    assert any(named in f for f in found), found
    assert found[0].startswith(f"line {source.splitlines().index(f'    {line}') + 1}:")


def test_a_table_of_precomputed_factors_is_allowed_only_where_the_task_takes_one() -> None:
    source = WRAPPER.replace("    return y", "    c = torch.cos(x)\n    return y")
    assert named_compute.problems(source)
    assert named_compute.problems(source, constants_ok=True) == []


def test_the_judge_refuses_the_branch_before_anything_runs() -> None:
    """The plant past every row count the judge reaches: refused at the syntax stage."""
    source = (PLANTS / "redteam9_rmsnorm_rows_past_reach.py").read_text()
    result = evaluate("rmsnorm", source, shapes=[(2, 64)], seeds=1, refuse_imports=True)
    assert not result.ok
    assert (result.stage, result.error_kind) == ("syntax", "torch_compute"), result.error_message
    assert "torch.rsqrt" in result.error_message
