"""Fresh inputs every evaluation, and the input conditions each task declares.

The plain draw (3·randn, contiguous positions) hides numerics that users' inputs expose:
a softmax without the row max, an RMSNorm without eps, a RoPE that assumes each
sequence's positions run on from its first. Each is planted from the task's own naive
kernel with one line changed, passes the plain draw, and must fail its condition."""

from __future__ import annotations

import pytest

from kernelkb.kernels.base import get_task
from kernelkb.optimizer.sandbox import evaluate

PLANTED = {
    "softmax": ("e = tl.exp(x - tl.max(x, 0))", "e = tl.exp(x)", "large logits"),
    "rmsnorm": ("/ n_cols + eps)", "/ n_cols)", "a zero row"),
    "rope": ("positions = positions.to(torch.int32).contiguous()",
             "positions = (positions[:, :1] + torch.arange(positions.shape[1], "
             "device=positions.device, dtype=torch.int32)[None, :]).to(torch.int32)"
             ".contiguous()", "positions"),
}


@pytest.mark.parametrize("task_name", sorted(PLANTED))
def test_a_kernel_right_only_on_the_plain_draw_fails_its_condition(task_name):
    task = get_task(task_name)
    old, new, condition = PLANTED[task_name]
    assert old in task.template, f"the planted line moved in {task_name}'s template"
    source = task.template.replace(old, new)  # every path of the kernel
    shapes = [task.cpu_shapes[0]]
    plain = evaluate(task_name, source, shapes=shapes, seeds=2, timeout_s=300,
                     conditions=False)
    assert plain.ok, plain.text  # the plain draw alone does not see it
    result = evaluate(task_name, source, shapes=shapes, seeds=2, timeout_s=300)
    assert result.error_kind in ("wrong_result", "bias"), result.text
    assert condition in result.error_message, result.error_message


def test_every_evaluation_draws_fresh_inputs():
    task = get_task("softmax")
    report = "\n    raise RuntimeError(f'SUM {float(x.float().sum()):.6f}')"
    source = task.template.replace("def run(x):", "def run(x):" + report, 1)
    sums = {evaluate("softmax", source, shapes=[(2, 64)], seeds=1).error_message
            .split("SUM ")[1].split()[0] for _ in range(2)}
    assert len(sums) == 2, sums
