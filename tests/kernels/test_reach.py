"""The reach (kernels/reach.py): shapes past every list, drawn within the spans and the
budget, reaching every region of the spans over many draws."""

from __future__ import annotations

import random

import pytest
import torch

from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.reach import Reach

TASKS_WITH_REACH = ("attention", "softmax", "matmul", "rmsnorm", "swiglu", "rope")


def _measures(task_name: str):
    task = get_task(task_name)
    return (lambda s: task.bytes_moved(s, torch.float16), lambda s: task.flops(s, torch.float16))


def _draws(reach: Reach, task_name: str, n: int = 400) -> list[tuple[int, ...]]:
    rng = random.Random(7)
    return [reach.draw(_measures(task_name), rng) for _ in range(n)]


def _listed(task_name: str, on: str) -> set[tuple[int, ...]]:
    """The shapes an evaluation there may name: the interpreter's lists, or every list."""
    task = get_task(task_name)
    gpu = (*task.sweep_shapes,) if on == "gpu" else ()
    return {tuple(s) for s in (*gpu, *task.edge_shapes, *task.cpu_shapes)}


@pytest.mark.parametrize("task_name", TASKS_WITH_REACH)
@pytest.mark.parametrize("on", ["gpu", "cpu"])
def test_every_draw_is_in_its_spans_within_budget_and_past_the_lists(task_name, on):
    task = get_task(task_name)
    reach = task.reach if on == "gpu" else task.cpu_reach
    assert reach is not None
    limits = [max(measure(b) for b in reach.budget) for measure in _measures(task_name)]
    longest = reach.longest
    most_listed = max(s[longest] for s in _listed(task_name, on))
    for shape in _draws(reach, task_name):
        assert all(d in span for d, span in zip(shape, reach.spans, strict=True)), shape
        assert all(measure(shape) <= limit
                   for measure, limit in zip(_measures(task_name), limits, strict=True)), shape
        assert shape[longest] > most_listed, shape


def test_the_forms_rounds_19_to_21_keyed_on_are_drawn():
    """The held-out rounds' short paths, each a region of the spans, each met in a few
    hundred draws (seeded here, fresh in the judge): under the interpreter, several new
    tokens over a long cache, past 128 of them, head_dim 256, several heads, more than
    eight long softmax rows, rows of 2**18-2**19 columns and rows whose masked half passes
    2**18, a K past 32K off any multiple of 256 and past the lists at M > 256, one SwiGLU
    row past the lists' width, a RoPE row past 8K tokens; on a GPU, more than 32
    sequence-heads over a long cache, a prefill of thousands of tokens over it, and N past
    4096 with K past the lists (under the interpreter's budget ~1% of draws)."""
    attention = _draws(get_task("attention").cpu_reach, "attention")
    assert any(s[2] >= 2 and s[3] > 2**15 for s in attention)
    assert any(s[2] > 128 and s[3] > 2**15 for s in attention)
    assert any(s[4] == 256 for s in attention)
    assert any(s[0] * s[1] > 1 for s in attention)
    softmax = _draws(get_task("softmax").cpu_reach, "softmax")
    assert any(rows > 8 and cols >= 2**18 for rows, cols in softmax)
    assert any(2**18 <= cols < 2**19 for _, cols in softmax)
    assert any(rows >= 7 and cols // 2 > 2**18 for rows, cols in softmax)
    matmul = _draws(get_task("matmul").cpu_reach, "matmul")
    assert any(k > 2**15 and k % 256 for _, _, k in matmul)
    assert any(m > 256 and k % 192 for m, _, k in matmul)
    assert any(n > 4096 and k % 192 for _, n, k in matmul)  # ~1% under the interpreter
    on_gpu_matmul = _draws(get_task("matmul").reach, "matmul")
    assert sum(n > 4096 and k % 192 for _, n, k in on_gpu_matmul) > 20
    assert any(rows == 1 for rows, _ in _draws(get_task("swiglu").cpu_reach, "swiglu"))
    assert any(s[0] == 1 and s[1] > 8192 for s in _draws(get_task("rope").cpu_reach, "rope"))
    on_gpu = _draws(get_task("attention").reach, "attention")
    assert any(s[0] * s[1] > 32 and s[3] > 2**16 for s in on_gpu)
    assert any(s[2] > 1024 for s in on_gpu)


def test_a_draw_over_budget_scales_the_other_dimensions_first():
    reach = Reach(spans=(range(1, 1001), range(1000, 2001)), budget=((1, 2000),))
    for shape in [reach.draw([lambda s: s[0] * s[1]], random.Random(i)) for i in range(50)]:
        assert shape[0] * shape[1] <= 2000
        assert shape[1] >= 1000  # the longest stays at the reach


def test_a_reach_is_refused_when_its_spans_do_not_match_its_budget():
    with pytest.raises(ValueError, match="spans"):
        Reach(spans=(range(1, 4),), budget=((1, 2),))
    with pytest.raises(ValueError, match="spans"):
        Reach(spans=(range(1, 4),), budget=())
    with pytest.raises(ValueError, match="empty"):
        Reach(spans=(range(4, 4), (1,)), budget=((4, 1),))


def test_a_shape_of_fewer_rows_than_conditions_meets_the_one_shifted_to():
    """The reach's rows take the conditions of the values in turn from a drawn one
    (every_condition.mixed(task, shift)): one row is plain, or a masked prefix, or ..."""
    from kernelkb.kernels.every_condition import mixed

    task = get_task("softmax")
    plain = task.make_inputs((1, 4096), torch.float32, 3, "cpu")
    rows = {mixed(task, shift).apply(plain, 11)[0][0].isneginf().sum().item()
            for shift in range(7)}
    assert 0 in rows and any(n > 0 for n in rows)  # plain, and a row with masked columns
    assert torch.equal(mixed(task, 0).apply(plain, 11)[0], plain[0])  # shift 0: plain first


@pytest.mark.parametrize("task_name", ["softmax", "rope", "rmsnorm"])
def test_a_shifted_condition_is_rebuilt_alike_from_its_name(task_name):
    """The judge names the condition it asks the worker to run under; the worker rebuilds
    it from the name. A shift lost on the way gave the worker other inputs than the
    judge's reference, and an honest RoPE kernel 97% of elements off."""
    from kernelkb.kernels.draws import resolve
    from kernelkb.kernels.every_condition import mixed

    task = get_task(task_name)
    shape = task.cpu_shapes[0]
    plain = task.make_inputs(shape, torch.float16, 3, "cpu")
    for shift in range(6):
        asked = mixed(task, shift)
        rebuilt = resolve(task, asked.name)
        assert rebuilt.name == asked.name
        for a, b in zip(asked.apply(plain, 11), rebuilt.apply(plain, 11), strict=True):
            assert torch.equal(a, b) if not a.is_floating_point() else \
                torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0))
    shifted = [mixed(task, s).apply(plain, 11) for s in range(6)]
    assert any(not torch.equal(x.nan_to_num(7), y.nan_to_num(7))
               for other in shifted[1:] for x, y in zip(other, shifted[0], strict=True)
               )  # the shift changes what the first row holds
