"""Inputs the task's reference takes and no draw of the judge makes.

The judge's checks draw shapes, values and layouts, but a candidate can still tell the
inputs they make from others a user passes: a rank more or one fewer, leading dimensions
that do not fold into rows (a sequence-first activation seen batch-first), a last
dimension that is not contiguous (channels-first), an element stride of 2 (the
interleaved halves of a fused projection), activations in float32 beside half weights,
an input that is the start of a larger buffer, index inputs broadcast over the batch, an
index input in the other integer dtype (Hugging Face's int64 positions), one dimension
past every list (a 256k vocabulary), a size between the powers of two the lists give (a
head of 80). A kernel
need not support them: the judge's last lap (``Judge.check_unusual_inputs``) accepts an
error from ``run()`` there. An answer it gives must be right and its own Triton's, so a
candidate that hands such inputs to PyTorch, where no other check looks, is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from kernelkb.kernels.base import Shape
from kernelkb.kernels.conditions import InputCondition

UNUSUAL = "unusual: "  # the prefix of these conditions' names (draws.resolve)
MORE_LEADING = UNUSUAL + "two more leading dimensions"
UNFOLDABLE = UNUSUAL + "leading dimensions that do not fold"
INTERLEAVED = UNUSUAL + "an element stride of 2"
OTHER_INT = UNUSUAL + "the other integer dtype"
NUMBERS_BETWEEN = UNUSUAL + "rows of every condition in wider rows, numbers between"
FEWER_LEADING = UNUSUAL + "one dimension fewer"
INNER_STRIDED = UNUSUAL + "a rank more with the last dimension strided"
FIRST_FLOAT32 = UNUSUAL + "the first input in float32"
PREFIX = UNUSUAL + "each input the start of a larger buffer"
BROADCAST_INDEX = UNUSUAL + "index inputs broadcast over the batch"
# asked only where the task's reference takes them (the judge tries it on a small sample):
# a matmul's reference refuses a float32 A beside a half B, an RMSNorm's takes it
WHERE_THE_REFERENCE_TAKES = frozenset({FEWER_LEADING, INNER_STRIDED, FIRST_FLOAT32,
                                       MORE_LEADING, UNFOLDABLE, BROADCAST_INDEX})
PAST_FACTOR = 2  # a dimension past the lists: twice the largest value any list gives it


def conditions(task: Any) -> list[InputCondition]:
    """Every condition of this module that can change the task's inputs. A task that
    declares no leading dimensions still gets them tried on its first input (a batched
    A for a matmul), where the reference takes them."""
    lead = tuple(getattr(task, "leading_dims", ()) or ()) or (0,)
    mutated = tuple(task.mutated_inputs)
    return [_more_leading(lead), _unfoldable(lead), _fewer_leading(lead),
            _inner_strided(lead), _interleaved(mutated), _other_int(), _broadcast_index(),
            _first_float32(),
            _prefix_of_larger(mutated), _numbers_between(task)]


def resolve(task: Any, name: str) -> InputCondition:
    (condition,) = [c for c in conditions(task) if c.name == name]
    return condition


def changes(condition: InputCondition, inputs: Sequence[Any]) -> bool:
    """Whether ``condition`` makes other inputs of these: a call
    on the same inputs as a plain one would check nothing new."""
    after = condition.apply(tuple(inputs), 0)
    return any(not isinstance(a, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype
               or a.stride() != b.stride()
               or a.untyped_storage().nbytes() != b.untyped_storage().nbytes()
               for a, b in zip(after, inputs, strict=True) if isinstance(b, torch.Tensor))


def _tensors(indices: tuple[int, ...], inputs: tuple[Any, ...],
             change: Callable[[torch.Tensor], torch.Tensor]) -> tuple[Any, ...]:
    return tuple(change(x) if i in indices and isinstance(x, torch.Tensor) and x.dim() >= 2
                 else x for i, x in enumerate(inputs))


def _more_leading(indices: tuple[int, ...]) -> InputCondition:
    def split(x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        lead = (2, 2, rows // 4) if rows % 4 == 0 else (1, 1, rows)
        return x.reshape(*lead, *x.shape[1:])

    return InputCondition(MORE_LEADING, "activations as (batch, heads, seq, ...): a rank "
                          "more than the judge's other checks pass",
                          lambda inputs, seed: _tensors(indices, inputs, split))


def _unfoldable(indices: tuple[int, ...]) -> InputCondition:
    def transposed(x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0] - x.shape[0] % 2  # an odd last row left out: two equal halves
        if rows < 2:
            return x
        batch_first = x[:rows].reshape(2, rows // 2, *x.shape[1:])
        return batch_first.transpose(0, 1).contiguous().transpose(0, 1)

    return InputCondition(UNFOLDABLE, "activations (batch, seq, ...) stored sequence-first "
                          "(a transposed view): no reshape folds them into rows without "
                          "a copy", lambda inputs, seed: _tensors(indices, inputs, transposed))


def _interleaved(mutated: tuple[int, ...]) -> InputCondition:
    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for i, x in enumerate(inputs):
            if i in mutated or not isinstance(x, torch.Tensor) or not x.is_floating_point() \
                    or x.dim() == 0 or x.numel() == 0:
                out.append(x)
                continue
            other = torch.randn((*x.shape[:-1], x.shape[-1]), generator=gen).to(x.dtype)
            pair = torch.stack((x.detach(), other.to(x.device)), dim=-1)  # [x0, o0, x1, ...]
            half = pair.reshape(*x.shape[:-1], 2 * x.shape[-1])[..., ::2]
            out.append(half.detach().requires_grad_() if x.requires_grad else half)
        return tuple(out)

    return InputCondition(INTERLEAVED, "every float input as one half of a buffer it shares "
                          "element by element with other values (gate_up[..., ::2])", apply)


def _fewer_leading(indices: tuple[int, ...]) -> InputCondition:
    def first_row(x: torch.Tensor) -> torch.Tensor:
        return x[0].clone()

    return InputCondition(FEWER_LEADING, "activations with one dimension fewer (a sampler's "
                          "1-D logits of one token)",
                          lambda inputs, seed: _tensors(indices, inputs, first_row))


def _inner_strided(indices: tuple[int, ...]) -> InputCondition:
    def channels_first(x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0] - x.shape[0] % 2
        if rows < 2 or x.dim() != 2:
            return x
        halves = x[:rows].reshape(2, rows // 2, x.shape[1])
        return halves.transpose(1, 2).contiguous().transpose(1, 2)  # last stride rows // 2

    return InputCondition(INNER_STRIDED, "activations (batch, seq, hidden) stored "
                          "(batch, hidden, seq): a rank more, the last dimension not "
                          "contiguous (h.transpose(1, 2))",
                          lambda inputs, seed: _tensors(indices, inputs, channels_first))


def _first_float32() -> InputCondition:
    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        out, done = [], False
        for x in inputs:
            if not done and isinstance(x, torch.Tensor) and x.is_floating_point():
                done = True
                if x.dtype in (torch.float16, torch.bfloat16):
                    wide = x.detach().float()
                    x = wide.requires_grad_() if x.requires_grad else wide
            out.append(x)
        return tuple(out)

    return InputCondition(FIRST_FLOAT32, "the activations in float32 beside the other inputs "
                          "in the dtype asked (the other way round from float32 weights)",
                          apply)


def _prefix_of_larger(mutated: tuple[int, ...]) -> InputCondition:
    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for i, x in enumerate(inputs):
            if i in mutated or not isinstance(x, torch.Tensor) or x.numel() == 0:
                out.append(x)
                continue
            tail = torch.randn(max(16, x.numel() // 2), generator=gen).to(x.dtype)
            big = torch.cat((x.detach().reshape(-1), tail.to(x.device)))
            view = big[:x.numel()].view(x.shape)  # offset 0, contiguous, storage larger
            out.append(view.requires_grad_() if x.requires_grad else view)
        return tuple(out)

    return InputCondition(PREFIX, "every input the contiguous start of a larger buffer "
                          "(a server's persistent buffers), numbers after it", apply)


def _broadcast_index() -> InputCondition:
    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        return tuple(x[:1].clone() if isinstance(x, torch.Tensor) and not x.is_floating_point()
                     and x.dtype != torch.bool and x.dim() >= 2 and x.shape[0] > 1 else x
                     for x in inputs)

    return InputCondition(BROADCAST_INDEX, "index inputs of one row for the whole batch "
                          "(positions (1, seq), Hugging Face's cache_position.unsqueeze(0))",
                          apply)


def _other_int() -> InputCondition:
    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        swap = {torch.int32: torch.int64, torch.int64: torch.int32}
        return tuple(x.to(swap[x.dtype]) if isinstance(x, torch.Tensor) and x.dtype in swap
                     else x for x in inputs)

    return InputCondition(OTHER_INT, "index inputs in the other integer dtype (int64 "
                          "positions, as Hugging Face passes them)", apply)


def _numbers_between(task: Any) -> InputCondition:
    """The rows of every declared condition at once (every_condition.mixed: a spike, a masked
    prefix, ...) as rows of wider buffers whose gaps hold numbers at the input's scale,
    as a caller's padded batch does: the judge's other strided draws hold NaN there,
    which a kernel reading the gap could take for a sign it is watched."""
    from kernelkb.kernels.every_condition import mixed

    every = mixed(task)
    mutated = tuple(task.mutated_inputs)

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for i, x in enumerate(every.apply(tuple(inputs), seed)):
            if i in mutated or not isinstance(x, torch.Tensor) or x.dim() < 2 \
                    or not x.is_floating_point():
                out.append(x)
                continue
            scale = float(x.detach().float().abs().nan_to_num(0, 0, 0).mean()) or 1.0
            pad = 16 * (i + 1)
            wider = (torch.randn((*x.shape[:-1], x.shape[-1] + pad), generator=gen) * scale
                     ).to(x.dtype).to(x.device)
            view = wider[..., :x.shape[-1]]
            view.copy_(x.detach())
            out.append(view.detach().requires_grad_() if x.requires_grad else view)
        return tuple(out)

    return InputCondition(NUMBERS_BETWEEN, "the rows of every declared condition at once, "
                          "as rows of wider buffers with numbers (not NaN) between", apply)


def shapes(lists: Sequence[Shape], anchor: Shape) -> list[Shape]:
    """Per dimension the lists vary, ``anchor`` with that dimension past every list: twice
    the largest value any gives it, or, where all its values are powers of two (a head
    size), the least of them times 1.25 (64 -> 80). The caller keeps the ones the
    reference takes and that fit its budget."""
    out: list[Shape] = []
    for i, column in enumerate(zip(*lists, strict=True)):
        values = sorted(set(column))
        if len(values) < 2 or set(values) <= {0, 1}:
            continue  # a fixed dimension or a flag
        if all(v > 0 and v & (v - 1) == 0 for v in values):
            new = max(values[0] + values[0] // 4, values[0] + 1)
        else:
            new = PAST_FACTOR * values[-1]
        shape = (*anchor[:i], new, *anchor[i + 1:])
        if shape not in out and shape != tuple(anchor):
            out.append(shape)
    return out
