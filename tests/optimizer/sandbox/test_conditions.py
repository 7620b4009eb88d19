"""Fresh inputs every evaluation, and the input conditions each task declares.

The plain draw (3·randn, contiguous positions) hides numerics that users' inputs expose:
a softmax without the row max, an RMSNorm without eps, a RoPE that assumes each
sequence's positions run on from its first. Each is planted from the task's own naive
kernel with one line changed, passes the plain draw, and must fail its condition."""

from __future__ import annotations

import pytest
import torch

from kernelkb.kernels.base import get_task
from kernelkb.optimizer.sandbox import evaluate

PLANTED = {  # task -> (the lines changed: (old, new), ...), the condition that sees it
    "softmax": ((("e = tl.exp(x - tl.max(x, 0))", "e = tl.exp(x)"),), "large logits"),
    "rmsnorm": ((("/ n_cols + eps)", "/ n_cols)"),), "a zero row"),
    # each token's position as its sequence's first plus its index, worked out in the
    # kernel (torch arithmetic on the positions would be caught by the Triton-only rule
    # first): the sequence length goes in where the table length goes, which the kernel
    # reads only with the table
    "rope": ((("pos = tl.load(pos_ptr + token)",
               "pos = tl.load(pos_ptr + token - token % table_len) + token % table_len"),
              ("cos, sin, table_len = freq_hi, freq_lo, 0  # never read",
               "cos, sin, table_len = freq_hi, freq_lo, seq")), "positions"),
}


@pytest.mark.parametrize("task_name", sorted(PLANTED))
def test_a_kernel_right_only_on_the_plain_draw_fails_its_condition(task_name):
    task = get_task(task_name)
    changes, condition = PLANTED[task_name]
    source = task.template
    for old, new in changes:
        assert old in source, f"the planted line moved in {task_name}'s template"
        source = source.replace(old, new)  # every path of the kernel
    shapes = [task.cpu_shapes[0]]
    plain = evaluate(task_name, source, shapes=shapes, seeds=2, timeout_s=300,
                     conditions=False)
    assert plain.ok, plain.text  # the plain draw alone does not see it
    result = evaluate(task_name, source, shapes=shapes, seeds=2, timeout_s=300)
    assert result.error_kind in ("wrong_result", "bias"), result.text
    assert condition in result.error_message, result.error_message


def test_a_kernel_that_takes_the_row_length_for_the_stride_fails_strided_rows():
    """Matmul declares no condition of its own; every task gets strided rows. Its naive
    kernel passes A's row stride; the plant passes K, right only where A is contiguous."""
    task = get_task("matmul")
    assert [c.name for c in task.input_conditions] == ["strided rows"]
    source = task.template.replace("                        a.stride(0), a.stride(1), "
                                   "b.stride(0), b.stride(1),",
                                   "                        K, a.stride(1), "
                                   "b.stride(0), b.stride(1),")
    assert source != task.template, "the planted line moved in matmul's template"
    shapes = [task.cpu_shapes[0]]
    plain = evaluate("matmul", source, shapes=shapes, seeds=1, conditions=False)
    assert plain.ok, plain.text
    result = evaluate("matmul", source, shapes=shapes, seeds=1)
    assert result.error_kind == "wrong_result", result.text
    assert "[strided rows]" in result.error_message, result.error_message
    honest = evaluate("matmul", task.template, shapes=shapes, seeds=1)
    assert honest.ok, honest.text


def test_strided_rows_keep_the_values_and_leave_written_inputs_alone():
    from kernelkb.kernels.base import ROW_PAD, strided_rows

    x, cache, w = torch.randn(3, 5), torch.randn(2, 4), torch.randn(5)
    strided = strided_rows(mutated=(1,)).apply((x, cache, w, 7), 0)
    assert torch.equal(strided[0], x) and strided[0].stride() == (5 + ROW_PAD, 1)
    assert strided[0].untyped_storage().nbytes() == 3 * (5 + ROW_PAD) * 4
    assert strided[1] is cache and strided[2] is w and strided[3] == 7
    assert get_task("attention").input_conditions[-1].name == "strided rows"


def test_every_evaluation_draws_fresh_inputs():
    task = get_task("softmax")
    report = "\n    raise RuntimeError(f'SUM {float(x.float().sum()):.6f}')"
    source = task.template.replace("def run(x):", "def run(x):" + report, 1)
    sums = {evaluate("softmax", source, shapes=[(2, 64)], seeds=1).error_message
            .split("SUM ")[1].split()[0] for _ in range(2)}
    assert len(sums) == 2, sums
