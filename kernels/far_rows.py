"""Rows far apart: one input's leading dimension at a stride that carries its offsets
past 2**31 and 3 x 2**31 elements.

Why: the wide shape (optimizer/sandbox/wide_offsets.py) is one dense point per task just
past 2**31 elements, in one tensor. A kernel whose offsets are 32-bit only where that
point does not look is right there and faults for a user: past 2**32 (rows split into
launches of under 2**31 each), on a view whose reach passes its element count (a
``chunk`` of a fused gate_up: 64-bit offsets chosen by ``numel()``), in the (batch, seq,
hidden) form, or on the input the wide shape keeps small (matmul's A, rope's k). Here
each integer or float input in turn, each of its leading dimensions in turn, is laid out
with that dimension outermost in memory and its ``n`` entries ``stride`` elements apart,
the other dimensions packed between, the last entry past ``REACH_FACTOR`` x 2**31. Any
offset of that input computed in 32 bits wraps there. The stride stays under 2**31 (an
int32 argument: Triton would type a larger one int64, and the multiply with it too) and
is the smallest that reaches on the listed shape with the most entries; the storage
(about 3 x 2**31 elements, 12 GiB in float16) is allocated and never filled but for the
view, so the check costs one call on a listed shape.

A condition is named ``far rows: input I, dim D, stride S`` (``, leading`` where the
input is first split as a model passes it: conditions.leading_dims), so the worker and
the judge build the same layout; the reference takes the same values packed
(``InputCondition.reference_inputs``): a 3 x 2**31-element copy in the judge is no check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelkb.kernels.conditions import InputCondition, leading_dims

PREFIX = "far rows: "
LIMIT = 2**31  # past this element, 32-bit offset arithmetic wraps
ALIGN = 64  # elements: a stride keeps the divisibility Triton specialises on
MEMORY_MARGIN = 2**30  # bytes the GPU's judge keeps free beside a layout's storage
# the last entry's offset, in limits: past 2**32 with room, so rows split into two
# launches of under 2**31 each (right up to 2**32) still span more than 2**31 a launch
REACH_FACTOR = 3
# the input set a layout's shape may hold (bytes): the shape with the most entries
# under it, so the stride is the smallest that reaches (a kernel that steps a block of
# rows at a time, ``BLOCK * stride`` in 32 bits, is safe on every real tensor: its rows
# would need 2**31 / BLOCK elements each)
VALUES_BYTES = 2**30
_NAME = re.compile(r"far rows: input (\d+), dim (\d+), stride (\d+)(, leading)?$")


@dataclass(frozen=True)
class Far:
    """Input ``input`` (split into leading dimensions first where ``leading``) with
    dimension ``dim`` outermost in memory, its entries ``stride`` elements apart."""

    input: int
    dim: int
    stride: int
    leading: bool = False

    @property
    def name(self) -> str:
        return (f"{PREFIX}input {self.input}, dim {self.dim}, stride {self.stride}"
                + (", leading" if self.leading else ""))

    @classmethod
    def parse(cls, name: str) -> Far:
        match = _NAME.match(name)
        if match is None:
            raise ValueError(f"not a far-rows condition: {name!r}")
        return cls(int(match[1]), int(match[2]), int(match[3]), bool(match[4]))

    def condition(self, task: Any) -> InputCondition:
        split = leading_dims(tuple(task.leading_dims)) if self.leading else None

        def packed(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
            return split.apply(inputs, seed) if split is not None else tuple(inputs)

        def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
            out = list(packed(inputs, seed))
            out[self.input] = laid_far(out[self.input], self.dim, self.stride)
            return tuple(out)

        return InputCondition(self.name, f"input {self.input}'s dimension {self.dim} "
                              f"{self.stride:,} elements apart: its offsets past "
                              f"{REACH_FACTOR} x 2**31", apply,
                              reference_inputs=packed)


def far_stride(entries: int, packed: int, limit: int = LIMIT) -> int | None:
    """The stride that puts the last of ``entries`` past ``REACH_FACTOR * limit`` (or as
    far as a stride under ``limit`` reaches), rounded up to ``ALIGN``; None where no
    stride under the limit puts an entry past it, or the other dimensions (``packed``
    elements) do not fit between two entries."""
    if entries < 3:  # index 1 times a stride under the limit stays under it
        return None
    stride = min(math.ceil((REACH_FACTOR * limit + ALIGN) / (entries - 1) / ALIGN) * ALIGN,
                 (limit - 1) // ALIGN * ALIGN)
    if stride < packed or (entries - 1) * stride < limit:
        return None
    return stride


def laid_far(x: torch.Tensor, dim: int, stride: int) -> torch.Tensor:
    """``x``'s values in a view with ``dim`` outermost, its entries ``stride`` apart, the
    other dimensions packed in their order between; the storage past them unfilled."""
    others = [d for d in range(x.dim()) if d != dim]
    strides, step = [0] * x.dim(), 1
    for d in reversed(others):
        strides[d], step = step, step * x.shape[d]
    strides[dim] = stride
    storage = torch.empty(_elements(x, dim, stride), dtype=x.dtype, device=x.device)
    view = storage.as_strided(tuple(x.shape), tuple(strides))
    with torch.no_grad():
        view.copy_(x)
    return view.requires_grad_(x.requires_grad)


def _elements(x: torch.Tensor, dim: int, stride: int) -> int:
    return (x.shape[dim] - 1) * stride + x.numel() // max(1, x.shape[dim])


def storage_bytes(x: torch.Tensor, dim: int, stride: int) -> int:
    """The bytes ``laid_far`` allocates for ``x``."""
    return _elements(x, dim, stride) * x.element_size()


def _laid_inputs(x: Any, mutated: bool) -> bool:
    return isinstance(x, torch.Tensor) and not mutated and x.dim() >= 2 and \
        x.dtype != torch.bool and not x.is_complex()


def plan(task: Any, shapes: Sequence[tuple[int, ...]], dtype: torch.dtype,
         limit: int = LIMIT) -> Iterator[tuple[tuple[int, ...], Far, int]]:
    """(shape, layout, bytes) for each laid-out input and leading dimension: on the
    shape of ``shapes`` where that dimension has the most entries (the inputs under
    ``VALUES_BYTES``; the fewer bytes on a tie), so its stride from ``far_stride`` is the
    smallest. Inputs are read from fake tensors (no memory); a task whose maker
    needs real tensors gets none."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mutated = set(getattr(task, "mutated_inputs", ()) or ())
    split = leading_dims(tuple(task.leading_dims)) if getattr(task, "leading_dims", ()) \
        else None
    best: dict[tuple[int, int, bool], tuple[tuple[int, int], tuple[int, ...], Far, int]] = {}
    for shape in shapes:
        try:
            with FakeTensorMode():
                plain = tuple(task.make_inputs(tuple(shape), dtype, 0, "cpu"))
                forms = [(False, plain)] + ([(True, split.apply(plain, 0))] if split else [])
                values = sum(x.numel() * x.element_size() for x in plain
                             if isinstance(x, torch.Tensor))
                if values > VALUES_BYTES:
                    continue
                for leading, inputs in forms:
                    for i, x in enumerate(inputs):
                        if not _laid_inputs(x, i in mutated) or \
                                (leading and x is plain[i]):
                            continue
                        for d in range(x.dim() - 1):
                            n = x.shape[d]
                            stride = far_stride(n, x.numel() // max(1, n), limit)
                            rank = (stride or 0, values)  # the most entries, then bytes
                            key = (i, d, leading)
                            if stride is None or (key in best and best[key][0] <= rank):
                                continue
                            best[key] = (rank, tuple(shape), Far(i, d, stride, leading),
                                         storage_bytes(x, d, stride))
        except Exception:  # noqa: BLE001 - a user's task that needs real tensors
            return
    for _, shape, far, size in sorted(best.values(), key=lambda f: (f[2].input, f[2].dim,
                                                                    f[2].leading)):
        yield shape, far, size
