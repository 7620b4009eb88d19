"""The launch plan (optimizer/sandbox/launch_plan.py), recorded by the real tracker on the
CPU interpreter and replayed on fresh inputs: every shipped naive kernel replays right;
a wrapper whose answer came from PyTorch after its launch, or from a value it kept from
an earlier call, replays wrong; a data-independent table made in PyTorch replays right."""

from __future__ import annotations

import pytest
import torch

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox import checks, launch_plan, provenance

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SOFTMAX_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def rows(out, x, n, s, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < n
    v = tl.load(x + r * s + c, mask=m, other=-float("inf")).to(tl.float32) * SCALE
    e = tl.exp(v - tl.max(v, 0))
    tl.store(out + r * s + c, (e / tl.sum(e, 0)).to(out.dtype.element_ty), mask=m)
'''
HONEST = SOFTMAX_KERNEL + '''
def run(x):
    out = torch.empty_like(x)
    rows[(x.shape[0],)](out, x, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]),
                        SCALE=1.0)
    return out
'''
TORCH_AFTER = SOFTMAX_KERNEL + '''
def run(x):
    out = torch.empty_like(x)
    rows[(x.shape[0],)](out, x, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]),
                        SCALE=0.0)  # a launch that computes nothing of the answer
    out.copy_(torch.softmax(x.float(), -1))
    return out
'''
KEPT = SOFTMAX_KERNEL + '''
SEEN = {}


def run(x):
    if "first" in SEEN:  # a later call: the first call's answer, whatever the input
        out = torch.empty_like(x)
        out.copy_(SEEN["first"])
        return out
    out = torch.empty_like(x)
    rows[(x.shape[0],)](out, x, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]),
                        SCALE=1.0)
    SEEN["first"] = out.clone()
    rows[(x.shape[0],)](out, x, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]),
                        SCALE=1.0)
    return out
'''


def _replayed(source: str, task_name: str, shape: tuple[int, ...], dtype=torch.float32,
              calls: int = 2):
    """(replayed outputs, reference) on fresh inputs, the plan recorded on the last of
    ``calls`` calls, as the worker records it."""
    task = get_task(task_name)
    module = load_candidate(source, "plan_candidate")
    tracker = provenance.install(module.__file__, task.torch_constants)
    inputs = [_copy(x) for x in task.make_inputs(shape, dtype, 0, "cpu")]
    plan = launch_plan.Plan()
    for n in range(calls):
        for x, f in zip(inputs, task.make_inputs(shape, dtype, n, "cpu"), strict=True):
            if isinstance(x, torch.Tensor):
                x.copy_(f)
        with tracker.call(inputs):
            if n == calls - 1:
                plan.inputs, tracker.plan = list(inputs), plan
            try:
                out = module.run(*inputs)
            finally:
                tracker.plan = None
    plan.finish(out)
    fresh = [_copy(x) for x in task.make_inputs(shape, dtype, 90, "cpu")]
    ref = task.reference(*[_copy(x) for x in fresh])
    return launch_plan.replay(plan, fresh), ref, plan


def _copy(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


def _right(out, ref) -> bool:
    stats = checks.compare_outputs(out, ref, 2e-3, 2e-3)
    return not isinstance(stats, str) and checks.shape_verdict(stats, 1e-3) is None


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_every_naive_kernel_replays_right(name):
    task = get_task(name)
    out, ref, plan = _replayed(task.render(task.default_config), name, task.cpu_shapes[0])
    assert any(s.launch for s in plan.steps)
    assert _right(out, ref)


def test_an_answer_pytorch_made_after_the_launch_replays_wrong():
    out, ref, plan = _replayed(TORCH_AFTER, "softmax", (4, 100))
    assert [s.launch is not None for s in plan.steps].count(True) == 1
    assert not _right(out, ref)  # the torch softmax is not in the plan: stale there
    honest, ref, _ = _replayed(HONEST, "softmax", (4, 100))
    assert _right(honest, ref)


def test_an_answer_kept_from_an_earlier_call_replays_wrong():
    out, ref, _ = _replayed(KEPT, "softmax", (4, 100), calls=2)
    assert not _right(out, ref)


def test_fresh_inputs_laid_out_otherwise_are_not_replayed():
    task = get_task("softmax")
    _, _, plan = _replayed(HONEST, "softmax", (4, 100))
    wide = torch.randn(4, 116)[:, :100]  # a strided view: another layout
    with pytest.raises(launch_plan.LayoutChanged):
        launch_plan.replay(plan, [wide])
    assert task.name == "softmax"
