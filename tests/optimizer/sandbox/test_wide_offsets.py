"""Offsets past 2**31 elements: the judge compares the rows of a wide shape past that
element (optimizer/sandbox/wide_offsets.py). The GPU's judge asks each task's
``wide_shape`` past 2**31; here the same check runs at 2**16 on the interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox.wide_offsets import WIDE_ELEMENTS, last_rows, tail_rows

BAD = Path(__file__).parents[2] / "bad_kernels"
SHAPES = [(4, 128), (16, 1000)]  # 16,000 elements at most: under the 2**16 below
NARROW = ((80, 1000), 2**16)  # 80,000 elements: rows 65..79 hold elements past 65,536


def test_the_tail_is_the_rows_of_the_largest_tensor_past_the_element() -> None:
    x, weight = torch.empty(80, 1000), torch.empty(1000)  # 2**16 lies in row 65
    assert tail_rows([x, weight], 80, 2**16) == 15
    assert tail_rows([x[:60], weight], 60, 2**16) == 0  # 60,000 elements: none past
    a, c = torch.empty(80, 10), torch.empty(80, 2000)  # the output is the wide one
    assert tail_rows([a, c], 80, 2**16) == 80 - 2**16 // 2000
    assert tail_rows([torch.empty(0, 5)], 0, 2**16) == 0


def test_only_tensors_with_those_rows_are_cut() -> None:
    x, w = torch.arange(80.0).reshape(8, 10), torch.arange(10.0)
    cut = last_rows([x, w, 3], 8, 2)
    assert torch.equal(cut[0], x[6:]) and cut[1] is w and cut[2] == 3


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_every_shipped_wide_shape_has_one_tensor_past_2_31(name: str) -> None:
    """The shapes are declared, not drawn: each must pass 2**31 elements in a tensor with
    the shape's rows (read from fake tensors: no memory), by few enough that the judge
    and the worker both hold it on an 80 GB card."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernelkb.kernels.scalar_args import call_with
    from kernelkb.optimizer.sandbox.checks import flatten_tensors

    task = get_task(name)
    wide = task.wide_shape
    if wide is None:
        pytest.skip(f"{name} declares no wide shape")
    with FakeTensorMode():
        inputs = list(task.make_inputs(wide, torch.float16, 0, "cpu"))
        tensors = [*inputs, *flatten_tensors(call_with(task.reference, inputs))]
    tail = tail_rows(tensors, wide[0])
    assert 0 < tail < wide[0]
    assert max(t.numel() for t in tensors if isinstance(t, torch.Tensor)) < 1.1 * WIDE_ELEMENTS


@pytest.mark.slow
def test_a_kernel_whose_offsets_wrap_is_wrong_on_the_wide_rows() -> None:
    """Failing first: on shapes under 2**16 elements the narrow-offset softmax passes the
    judge; asked the wide shape, the rows past element 65,536 are refused."""
    from kernelkb.optimizer.sandbox import evaluate

    source = (BAD / "narrow_offsets_softmax.py").read_text()
    # the reach named as a shape the plant's 16-bit offsets take: the lap under test is
    # what refuses it (the task's own reach shapes, 600K-column rows, would first)
    plain = evaluate("softmax", source, shapes=SHAPES, seeds=1, conditions=False,
                     reach=SHAPES[-1])
    assert plain.ok, plain.error_message
    wide = evaluate("softmax", source, shapes=SHAPES, seeds=1, conditions=False,
                    wide_offsets=NARROW, reach=SHAPES[-1])
    # the interpreter sees two programs store to one place (the wrapped rows land on
    # earlier ones: a data race) before any value is compared; a GPU writes wrong rows
    assert not wide.ok and wide.error_kind in ("wrong_result", "crash"), wide.error_message
    assert "[last 15 of 80]" in wide.error_message, wide.error_message


@pytest.mark.slow
def test_an_honest_kernel_is_right_on_the_wide_rows() -> None:
    from kernelkb.optimizer.sandbox import evaluate

    result = evaluate("softmax", (BAD / "_good.py").read_text(), shapes=SHAPES, seeds=1,
                      conditions=False, wide_offsets=NARROW)
    assert result.ok, result.error_message


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_32_bit_row_offsets_are_wrong_on_the_gpu_judges_wide_shape() -> None:
    """The 32-bit plant on the judge's own wide shape past 2**31 (GPU only): refused as a
    wrong answer, or as the crash of an access outside its buffers."""
    from kernelkb.optimizer.sandbox import evaluate

    result = evaluate("rmsnorm", (BAD / "redteam6_int32_offsets.py").read_text(),
                      shapes="auto", seeds=1, timeout_s=900)
    assert not result.ok, "the plant passed the judge"
    assert result.error_kind in ("wrong_result", "crash"), result.error_message


def test_the_memory_a_wide_shape_needs_is_read_without_allocating_it() -> None:
    """The GPU's judge skips the check on a card without MEMORY_FACTOR times this free:
    softmax's logits in float16 are 2 x 4.3 GB (input and output)."""
    from kernelkb.optimizer.sandbox.wide_offsets import shape_bytes

    task = get_task("softmax")
    assert shape_bytes(task, task.wide_shape, torch.float16) == 2 * 16800 * 128256 * 2
