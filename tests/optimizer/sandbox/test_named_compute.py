"""PyTorch compute named outside a candidate's kernels, and anything but views, copies,
casts and measurements done to its tensors, refused from the source on every path
(optimizer/sandbox/named_compute.py, tensor_flow.py): every shipped kernel passes, and
the plants that take PyTorch or Python only on an input the judge never draws are refused
before they run."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox import evaluate, named_compute, source_rules

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
        assert source_rules.refused(spec.render(config), spec) is None, (task, config)


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


@pytest.mark.parametrize(("line", "said"), [
    ("y = x * 2", "with *"),
    ("y = -x", "unary operator"),
    ("m = x > 0", "compares a tensor's values"),
    ("y = x.tolist()", ".tolist()"),
    ("y = x.item()", ".item()"),
    ("x.requires_grad_(False)", ".requires_grad_()"),
    ("y = operator.imatmul(x, x)", "operator.imatmul"),
    ("y = sum(x)", "Python's sum()"),
    ("y = sum((x, x))", "Python's sum()"),
    ("y = list(x)", "Python's list()"),
    ("y = [math.exp(v) for v in x]", "iterates over a tensor"),
    ("y = x[x.argmax()]", "indexes a tensor by a tensor"),
    ("z = _helper(x.t())", "with /"),
])
def test_what_a_wrapper_does_to_its_tensors_is_an_allow_list(line: str, said: str) -> None:
    """Arithmetic needs no op's name (red team 10): a value made from run()'s tensors is
    followed through the module, a helper's body included, and only viewed, copied, cast
    or measured."""
    source = WRAPPER.replace("import math", "import math\nimport operator").replace(
        "    return y", f"    {line}\n    return y") + "\n\ndef _helper(t):\n    return t / 2\n"
    found = named_compute.problems(source)
    assert any(said in f for f in found), found


def test_numbers_read_from_tensors_and_scalar_arguments_are_free() -> None:
    source = WRAPPER.replace("def run(x):", "def run(x, eps=1e-6, cache_len=0):").replace(
        "    return y", "    n = x.shape[-1] * x.stride(0) + cache_len * 2 - eps\n"
        "    cache = _CACHE.get(n)\n    if cache is None or x.numel() > n:\n"
        "        _CACHE[n] = y\n"
        "    for i, t in enumerate((x, y)):\n        assert t.is_contiguous(), i\n"
        "    return y") + "\n_CACHE = {}\n"
    assert named_compute.problems(source, tensor_args=(True, False, False)) == []


def test_tables_from_no_input_are_computed_only_where_the_task_takes_them() -> None:
    source = WRAPPER.replace("    return y", "    angles = torch.arange(8.0)[:, None] * 0.5\n"
                             "    c = torch.cos(angles)\n    return y")
    assert any("with *" in f for f in named_compute.problems(source))
    assert named_compute.problems(source, constants_ok=True) == []
    from_input = source.replace("torch.arange(8.0)", "x")
    assert named_compute.problems(from_input, constants_ok=True)


def test_pytorch_named_in_a_kernels_body_is_refused() -> None:
    """A @triton.jit body that names torch is Python called through .fn, not a kernel."""
    source = WRAPPER.replace("    tl.store(", "    z = torch.softmax(x, 0)\n    tl.store(")
    assert any("torch.softmax" in f for f in named_compute.problems(source))


@pytest.mark.parametrize(("line", "said"), [
    ("from torch.nn.functional import *", "star import"),
    ("torch.set_autocast_enabled('cuda', True)", "global state"),
    ("torch.cuda.set_device(0)", "global state"),
])
def test_the_allow_list_refuses_star_imports_and_torch_setters(line: str, said: str) -> None:
    from kernelkb.optimizer.sandbox import imports

    found = imports.problems(WRAPPER.replace("import triton\n", f"import triton\n{line}\n"))
    assert any(said in f for f in found), found


KEPT = '''
import torch
_POOL = {}
_TABLES = {}

def _table(x):
    if x.device not in _TABLES:
        _TABLES[x.device] = torch.zeros(8, device=x.device)
    return _TABLES[x.device]

def _fresh(x):
    return torch.empty_like(x)

def run(x):
    table = _table(x)
    BODY
'''


@pytest.mark.parametrize(("body", "refused"), [
    ("out = _fresh(x)\n    return out.view(-1)", False),
    ("return _table(x).clone()", False),  # a copy is made in the call
    ("ring = _POOL.setdefault(x.shape, [])\n    return ring[0].view(-1)", True),
    ("out = _POOL.get(x.shape)\n    return out if out is not None else _fresh(x)", True),
    ("return _table(x)", True),  # a module function run() returns from hands out the table
    ("return (_fresh(x), _POOL[0])", True),
])
def test_what_run_returns_is_made_in_the_call(body: str, refused: bool) -> None:
    """tensor_flow.kept_returns: a buffer read out of a module container, or a view of one,
    returned on any path (red team 9's output ring); tables passed to launches stay free."""
    verdict = source_rules.refused(KEPT.replace("BODY", body))
    assert (verdict is not None and verdict[0] == "cheat_aliasing") == refused, verdict
