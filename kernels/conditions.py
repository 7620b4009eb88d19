"""Input conditions: the inputs a correct kernel meets that the plain draw hides.

Each is an ``InputCondition`` whose ``apply(inputs, seed)`` returns the inputs changed: a
layout (strided rows, column-major, an offset view, a broadcast row, one fused buffer),
an autograd form, leading dimensions, float32 weights, non-finite values. A task gets the
generic ones (``GENERIC_CONDITIONS``) when it is built; the worker and the judge check
each on every shape. ``mixed_inputs`` lays several conditions of the values over one
input set.

Imports only torch: it runs on a bare GPU host, beside the sandbox.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class InputCondition:
    """A condition of the inputs a correct kernel must handle: ``apply(inputs, seed)``
    returns the inputs changed (new tensors; the seed is the evaluation's own);
    ``reference_inputs``, where set, the same values as the reference takes them (a
    layout too large to build twice: kernels/far_rows.py)."""

    name: str
    why: str
    apply: Callable[[tuple[Any, ...], int], tuple[Any, ...]]
    reference_inputs: Callable[[tuple[Any, ...], int], tuple[Any, ...]] | None = None


# elements past each row of a strided draw (strided_rows): 16, so a row stride keeps the
# row length's divisibility by 16, which Triton specialises an integer argument on: the
# strided draw is then no new compilation of a kernel the plain draws compiled already
ROW_PAD = 16


def strided_rows(mutated: tuple[int, ...] = ()) -> InputCondition:
    """Every float or integer input (but the ones the op writes) a strided view: one of
    two or more dimensions as the first columns of a buffer wider by ``ROW_PAD`` times its
    place among the inputs (so no two inputs share a row stride), a vector as every
    other element of a buffer twice its length; NaN (the integer type's largest value)
    in between. How a slice of a fused projection (q of a qkv matmul), a padded batch, a
    column of a stacked weight (``W[:, layer]``) or the last positions of longer ids
    (``position_ids[:, -seq:]``) reach a kernel. A kernel that takes a stride for a
    length, one input's stride for another's, or reads past a row's end, is wrong there."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        out, place = [], 0
        for i, x in enumerate(inputs):
            if i in mutated or not isinstance(x, torch.Tensor) or x.dim() == 0 or \
                    not (x.is_floating_point() or _is_integer(x)):
                out.append(x)
                continue
            place += 1
            out.append(_in_wider_rows(x, ROW_PAD * place) if x.dim() >= 2 else
                       _every_other(x))
        return tuple(out)

    return InputCondition(
        "strided rows", "each input a strided view: rows followed by NaNs, a different "
        "row stride each, vectors every other element (a slice of a wider buffer): no "
        "stride is a length", apply)


def _is_integer(x: torch.Tensor) -> bool:
    return not x.is_floating_point() and not x.is_complex() and x.dtype != torch.bool


def _filler(x: torch.Tensor) -> float | int:
    return float("nan") if x.is_floating_point() else torch.iinfo(x.dtype).max


def _every_other(x: torch.Tensor) -> torch.Tensor:
    buffer = torch.full((2 * x.shape[0],), _filler(x), dtype=x.dtype, device=x.device)
    view = buffer[::2]
    view.copy_(x)
    return view


def column_major(mutated: tuple[int, ...] = ()) -> InputCondition:
    """Every float input of two or more dimensions (but the ones the op writes) stored
    column-major, the transpose of a row-major buffer seen through ``.t()``: the last
    dimension's stride is not 1. A kernel that takes unit stride for granted is wrong
    there; one that calls ``.contiguous()`` or reads both strides is right."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        return tuple(x.transpose(-1, -2).contiguous().transpose(-1, -2)
                     if i not in mutated and isinstance(x, torch.Tensor)
                     and x.is_floating_point() and x.dim() >= 2 else x
                     for i, x in enumerate(inputs))

    return InputCondition("column-major inputs", "each float input the transpose of a "
                          "row-major buffer (x.t()): the last stride is not 1", apply)


def offset_views(mutated: tuple[int, ...] = ()) -> InputCondition:
    """Every float input (but the ones the op writes) a view that starts one element into
    its buffer (``buf[1:]``): a storage offset, and a pointer off every 16-byte boundary,
    as a slice of a larger tensor is."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        return tuple(_one_in(x) if i not in mutated and isinstance(x, torch.Tensor)
                     and x.is_floating_point() else x for i, x in enumerate(inputs))

    return InputCondition("offset views", "each float input starts one element into its "
                          "buffer (a slice): its pointer is on no 16-byte boundary", apply)


def _one_in(x: torch.Tensor) -> torch.Tensor:
    buffer = torch.empty(x.numel() + 1, dtype=x.dtype, device=x.device)
    view = buffer[1:].view(x.shape)
    view.copy_(x)
    return view


def broadcast_rows(mutated: tuple[int, ...] = ()) -> InputCondition:
    """Every float input of two or more dimensions (but the ones the op writes) one row
    seen as all of them (``expand``: a row stride of 0), as a broadcast bias or a single
    prompt repeated over a batch is."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        return tuple(x[..., :1, :].expand(x.shape) if i not in mutated
                     and isinstance(x, torch.Tensor) and x.is_floating_point()
                     and x.dim() >= 2 else x for i, x in enumerate(inputs))

    return InputCondition("broadcast rows", "one row seen as every row (expand: a row "
                          "stride of 0)", apply)


def _same_shaped(inputs: tuple[Any, ...], mutated: tuple[int, ...]) -> list[list[int]]:
    """The float inputs (but the ones the op writes) in groups of one shape, dtype and
    device, groups of two or more only: the inputs a fused projection hands over."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, x in enumerate(inputs):
        if i not in mutated and isinstance(x, torch.Tensor) and x.is_floating_point() \
                and x.dim() >= 1 and x.numel():
            groups.setdefault((tuple(x.shape), x.dtype, x.device), []).append(i)
    return [members for members in groups.values() if len(members) >= 2]


def _fused_dim(x: torch.Tensor, seed: int) -> int:
    return -2 if seed % 2 and x.dim() >= 2 else -1  # heads, or columns


def fused_buffer(mutated: tuple[int, ...] = ()) -> InputCondition:
    """Float inputs of the same shape and dtype (but the ones the op writes) as
    neighbouring blocks of one buffer, the way a fused projection hands them over: column
    blocks on an even seed (``gate, up = gate_up.chunk(2, -1)``), blocks of the
    next-to-last dimension on an odd one (q, k and v as heads of one qkv projection,
    ``qkv.view(b, s, 3 * h, d)``): each a view, all in one storage. A kernel that tells
    such inputs apart by their pointers or strides, or writes into one (its neighbour is
    the caller's), is wrong there."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        out = list(inputs)
        for members in _same_shaped(inputs, mutated):
            first = inputs[members[0]]
            dim = _fused_dim(first, seed)
            fused = torch.cat([inputs[i] for i in members], dim=dim)
            width = first.shape[dim]
            for k, i in enumerate(members):
                out[i] = fused.narrow(dim, k * width, width)
        return tuple(out)

    return InputCondition("one fused buffer", "inputs of one shape as neighbouring "
                          "column blocks of one buffer (gate_up.chunk(2, -1), a fused "
                          "qkv)", apply)


def fused_apart(mutated: tuple[int, ...] = ()) -> InputCondition:
    """The same inputs with a fused buffer's strides but not its placement: each a block
    of a buffer of its own, at the place another member takes in one fused buffer (the
    first input the second block of its buffer, the second the first of another), the
    other blocks other values. How halves reach an op from two fused projections, or in
    the other order (``x, gate = gate_up.chunk(2, -1)``, then ``op(gate, x)``). A kernel
    that takes a fused layout from strides alone and reaches one input through another's
    pointer reads the wrong values here: the strides promise a neighbour, the pointers
    hold another."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        gen = torch.Generator().manual_seed(seed)
        out = list(inputs)
        for members in _same_shaped(inputs, mutated):
            first = inputs[members[0]]
            dim = _fused_dim(first, seed)
            width, n = first.shape[dim], len(members)
            for k, i in enumerate(members):
                place = n - 1 - k if n - 1 - k != k else (k + 1) % n  # never its own block
                blocks = [torch.randn(first.shape, generator=gen).to(first.dtype)
                          .to(first.device) for _ in range(n)]
                blocks[place] = inputs[i].detach()
                view = torch.cat(blocks, dim=dim).narrow(dim, place * width, width)
                out[i] = view.detach().requires_grad_() if inputs[i].requires_grad else view
        return tuple(out)

    return InputCondition("fused blocks apart", "inputs of one shape as blocks of fused "
                          "buffers of their own, each where another would sit (two fused "
                          "projections, or the halves in the other order)", apply)


AUTOGRAD_FORMS = "autograd forms"


def grad_inputs(mutated: tuple[int, ...] = ()) -> InputCondition:
    """Float inputs (but the ones the op writes) in the autograd forms callers pass, one
    per seed in turn (each shape of an evaluation has a seed of its own, so three shapes
    meet all three): a training forward's (the first float input an activation, a
    non-leaf view made under autograd with ``grad_fn`` set; the others ``nn.Parameter``
    weights holding a ``.grad``, as gradient accumulation leaves them); every float input
    a leaf that requires grad; or every float input an inference tensor, made under
    ``torch.inference_mode`` as a server's are. A kernel must not behave otherwise for
    any of them, nor write into a ``.grad``."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        floats = [i for i, x in enumerate(inputs) if i not in mutated
                  and isinstance(x, torch.Tensor) and x.is_floating_point()]
        out = list(inputs)
        form = seed % 3
        for i in floats:
            if form == 2:
                with torch.inference_mode():
                    out[i] = inputs[i].detach().clone()
                continue
            leaf = inputs[i].detach().clone().requires_grad_()
            if form == 1:
                out[i] = leaf
            elif i == floats[0]:
                with torch.enable_grad():
                    out[i] = leaf.view_as(leaf)  # an activation: grad_fn set
            else:  # a weight, with the gradient an accumulation step left on it
                weight = torch.nn.Parameter(leaf.detach())
                weight.grad = torch.randn(weight.shape, generator=torch.Generator(
                    ).manual_seed(seed), dtype=torch.float32).to(weight.dtype).to(weight.device)
                out[i] = weight
        return tuple(out)

    return InputCondition(AUTOGRAD_FORMS, "the autograd forms callers pass: a training "
                          "forward's (a non-leaf activation, nn.Parameter weights with a "
                          ".grad), leaves that require grad, or inference tensors", apply)


LEADING_DIMS = "leading dimensions"


def leading_dims(indices: tuple[int, ...]) -> InputCondition:
    """The inputs at ``indices`` (a task's ``leading_dims``: activations a model hands over
    as (batch, seq, hidden)) with their rows as two leading dimensions: (2, rows / 2, ...)
    for an even row count, (1, rows, ...) otherwise, as the reference takes them. A
    kernel that reads only two dimensions, or hands such an input to PyTorch, is wrong or
    refused there."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        def split(x: torch.Tensor) -> torch.Tensor:
            rows = x.shape[0]
            lead = (2, rows // 2) if rows >= 2 and rows % 2 == 0 else (1, rows)
            return x.reshape(*lead, *x.shape[1:])

        return tuple(split(x) if i in indices and isinstance(x, torch.Tensor) and x.dim() >= 2
                     else x for i, x in enumerate(inputs))

    return InputCondition(LEADING_DIMS, "activations with leading dimensions (batch, seq, "
                          "...), as a model passes them", apply)


FLOAT32_INPUTS = "float32 weights"


def float32_weights(indices: tuple[int, ...]) -> InputCondition:
    """The inputs at ``indices`` (a task's ``float32_inputs``: norm weights, biases) in
    float32 beside half-precision activations, as mixed-precision models keep them (a
    Hugging Face RMSNorm's weight); inputs in float32 already are left as they are. A
    kernel that reads such a weight as if it had the activations' dtype is wrong there."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        first = next((x for x in inputs if isinstance(x, torch.Tensor)
                      and x.is_floating_point()), None)
        if first is None or first.dtype not in (torch.float16, torch.bfloat16):
            return inputs
        return tuple(x.float() if i in indices and isinstance(x, torch.Tensor)
                     and x.is_floating_point() else x for i, x in enumerate(inputs))

    return InputCondition(FLOAT32_INPUTS, "inputs the task names (weights) in float32 "
                          "beside half-precision activations, as mixed-precision models "
                          "keep them", apply)



NONFINITE = "non-finite values"


def nonfinite_values(values: tuple[float, ...], mutated: tuple[int, ...] = ()
                     ) -> InputCondition:
    """The first float input the op does not write holds each of ``values`` (the task's
    ``nonfinite``: NaN by default; softmax and RMSNorm add +inf and -inf) at a few places
    drawn from the seed, the rest as drawn: an overflow upstream or a bad mask reaches an
    op this way. The reference says what comes out (a NaN row of softmax, a NaN column of
    a matmul), and a NaN or inf must come out where it gives one, exactly
    (``checks.compare_outputs``): a kernel that reads a NaN as a masked entry or clamps an
    inf gives a finite answer where PyTorch gives NaN, and hides the fault downstream
    (anomaly checks, a loss scaler skipping the step)."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        out = list(inputs)
        for i, x in enumerate(inputs):
            if i in mutated or not isinstance(x, torch.Tensor) or not x.is_floating_point() \
                    or x.numel() == 0:
                continue
            y = x.detach().clone()  # the same layout, other values
            gen = torch.Generator().manual_seed(seed)
            places = torch.randint(0, x.numel(), (2 * len(values),), generator=gen).tolist()
            for k, place in enumerate(places):
                y[tuple(_unravel_index(place, tuple(x.shape)))] = values[k % len(values)]
            out[i] = y
            break
        return tuple(out)

    shown = ", ".join(str(v) for v in values)
    return InputCondition(NONFINITE, f"the first float input holds {shown} at a few places: "
                          "NaN and inf come out where the reference gives them, and only "
                          "there", apply)


def _unravel_index(flat: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(flat, shape or (1,))]


def mixed_inputs(inputs: tuple[Any, ...], conditions: Sequence[InputCondition], seed: int,
                 shift: int = 0) -> tuple[Any, ...]:
    """One input set that holds every condition of the values at once. Each condition is
    applied (the k-th with seed + k, so two that pick a row from the seed pick other rows)
    and kept where it changes values only (the same tensors' shapes, strides and dtypes,
    the same other arguments: not a layout, not another argument). Then each tensor
    input's rows (its first dimension) are the plain ones and those of the conditions
    that change every row, in turn (from the ``shift``-th), and a condition that changes
    some rows only (a zero row) has those rows as it made them."""
    sources = []
    for k, condition in enumerate(conditions, 1):
        changed = tuple(condition.apply(inputs, seed + k))
        if _values_only(inputs, changed):
            sources.append(changed)
    out: list[Any] = []
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] == 0:
            out.append(x)
            continue
        y = x.detach().clone()
        every, some = [x], []
        for source in sources:
            rows = _rows_changed(x, source[i])
            if bool(rows.all()):
                every.append(source[i])
            elif bool(rows.any()):
                some.append((rows, source[i]))
        for k in range(len(every)):  # row r takes every[(r + shift) % len(every)]
            y[k::len(every)] = every[(k + shift) % len(every)][k::len(every)]
        for rows, part in some:
            y[rows] = part[rows]
        out.append(y)
    return tuple(out)


def _rows_changed(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per row of the first dimension: whether ``y`` differs from ``x`` there (NaN where
    both are NaN counts as the same)."""
    differ = (x != y) & ~(torch.isnan(x) & torch.isnan(y)) if x.is_floating_point() \
        else x != y
    return differ.reshape(x.shape[0], -1).any(dim=1)


def _values_only(before: tuple[Any, ...], after: tuple[Any, ...]) -> bool:
    if len(before) != len(after):
        return False
    for x, y in zip(before, after, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            if x != y:
                return False
        elif (x.shape, x.stride(), x.dtype, x.device) != (y.shape, y.stride(), y.dtype,
                                                          y.device) or y.requires_grad:
            return False
    return True


def _in_wider_rows(x: torch.Tensor, pad: int = ROW_PAD) -> torch.Tensor:
    wider = torch.full((*x.shape[:-1], x.shape[-1] + pad), _filler(x),
                       dtype=x.dtype, device=x.device)
    view = wider[..., :x.shape[-1]]
    view.copy_(x)
    return view


# the conditions every task gets (Task.__post_init__), by name
GENERIC_CONDITIONS = frozenset(make().name for make in (
    strided_rows, column_major, offset_views, broadcast_rows, fused_buffer, fused_apart,
    grad_inputs)) | {NONFINITE}
