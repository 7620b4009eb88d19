"""Offsets past 2**31 elements: the rows a wide shape's check compares.

Why: a kernel that computes ``row * stride`` in 32 bits is right on every shape whose
tensors hold fewer than 2**31 elements and reads and writes other rows (or outside the
buffer) past that. Models reach it: logits over a 128k vocabulary for 16k tokens, a
long prefill, a deep KV cache. No check on smaller shapes can see it, so the GPU's judge
runs each task's ``wide_shape`` (kernels/base.py) once and compares the rows that hold
elements past 2**31 with the reference's. Only those rows come back from the worker: the
whole output is GiBs.

The rows are along the shape's first dimension (tokens, rows, batch), which every task's
leading inputs and outputs share; a tensor whose first dimension is another size (a
weight, the right side of a matmul) is whole in every row's answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

WIDE_ELEMENTS = 2**31  # past this element, 32-bit offset arithmetic wraps
# GPU memory the check asks free, in multiples of the shape's inputs and outputs: the
# judge's inputs and reference (and its float32 temporaries), the worker's inputs and
# the candidate's outputs
MEMORY_FACTOR = 4


def tail_rows(tensors: Iterable[Any], rows: int, past: int = WIDE_ELEMENTS) -> int:
    """How many last rows (of ``rows`` along dimension 0) hold an element past ``past``
    in the largest tensor that has them; 0 where no tensor is that wide."""
    tail = 0
    for value in tensors:
        if not isinstance(value, torch.Tensor) or value.dim() == 0 \
                or value.shape[0] != rows or rows == 0 or value.numel() <= past:
            continue
        per_row = value.numel() // rows
        tail = max(tail, rows - past // per_row)
    return tail


def last_rows(values: Sequence[Any], rows: int, tail: int) -> list[Any]:
    """``values`` with each tensor that has ``rows`` along dimension 0 cut to its last
    ``tail`` (views, no copy); anything else as it is."""
    return [value[rows - tail:] if isinstance(value, torch.Tensor) and value.dim() > 0
            and value.shape[0] == rows else value for value in values]


def shape_bytes(task: Any, shape: tuple[int, ...], dtype: torch.dtype) -> int | None:
    """Bytes of the task's inputs and reference outputs at ``shape``, read from fake
    tensors (no memory); None where the task's maker or reference does not take them."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernelkb.kernels.scalar_args import call_with
    from kernelkb.optimizer.sandbox.checks import flatten_tensors

    try:
        with FakeTensorMode():
            inputs = list(task.make_inputs(shape, dtype, 0, "cpu"))
            tensors = [*inputs, *flatten_tensors(call_with(task.reference, inputs))]
    except Exception:  # noqa: BLE001 - a user's task that needs real tensors
        return None
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
