"""The shape of a kernel task, and the registry that holds them.

A task is everything an optimizer needs to work on one op: the PyTorch reference (slow
but right), a correct naive Triton kernel (the starting point), an input maker, shapes
(a normal sweep and edge shapes), tolerances per dtype, a bytes / FLOPs model for the
roofline, and the knobs and structural variants an optimizer may turn.

A *candidate* is the source text of a Python module that defines ``run(*inputs)``, with
the same signature and result as the task's reference. Module-level constants in the
candidate's header (``BLOCK_SIZE = 1024``) are its configuration; ``Task.render`` builds
a candidate for any point of the task's search space, so every offline edit is a real
source edit with a real diff.

This module imports only torch, triton and numpy: it runs on a bare GPU host.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from kernelkb.kernels.dispatch_runtime import HEADER_LINE, dispatch_render, header_literal
from kernelkb.kernels.shared.errors import UserError
from kernelkb.kernels.shared.launch import Launch
from kernelkb.kernels.shared.vocabulary import DTYPE_NAMES
from kernelkb.kernels.validation import MISSING, TaskDefinitionError, closest, validate

Shape = tuple[int, ...]
ConfigValue = int | float | str | bool
Config = Mapping[str, ConfigValue]

# the data types a task may run in, by their names (kernels/shared/vocabulary.py)
DTYPES: dict[str, torch.dtype] = {name: getattr(torch, name) for name in DTYPE_NAMES}


SCRATCH_PER_WARP = 1024  # shared memory of reductions / layout conversions, per warp


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    # Largest |signed mean error| / mean |reference| allowed: catches a small systematic
    # bias that stays under atol/rtol elementwise (the article's section 5.1).
    max_bias: float = 1e-3


# Row-wise and elementwise ops computed in fp32 and stored in the input dtype: the error
# is one rounding of the output, so the bounds follow each dtype's resolution.
ELEMENTWISE_TOLERANCES = {
    "float32": Tolerance(atol=1e-5, rtol=1e-5, max_bias=1e-5),
    "float16": Tolerance(atol=1e-3, rtol=1e-2, max_bias=2e-3),
    "bfloat16": Tolerance(atol=8e-3, rtol=2e-2, max_bias=1e-2),
}


@dataclass(frozen=True)
class Knob:
    """A numeric launch or tile parameter with its legal values (the grid to search)."""

    name: str
    values: tuple[ConfigValue, ...]
    category: str  # a KNOB_CATEGORIES entry: tiling, warps_stages, launch_shape, ...
    help: str = ""

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError(f"knob {self.name}: no legal values")


@dataclass(frozen=True)
class Variant:
    """A structural alternative, switched by a header constant (a tl.constexpr inside)."""

    name: str  # the header constant, e.g. ONLINE_SOFTMAX
    # first value = the naive kernel's choice; for a variant added to a task later, also
    # the kernel as it was before (Task.complete: stored configurations without it mean it)
    values: tuple[ConfigValue, ...]
    category: str  # a KNOB_CATEGORIES entry (kernels/shared/vocabulary.py)
    help: str  # what it does and why it may help, shown to agents and in reports


REGIME_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class Regimes:
    """How a task's shapes fall into regimes: a configuration is best for a regime (a row
    length class, an M bucket, prefill vs decode), not for the whole task.

    Declarative on purpose, so an exported kernel can classify a call's inputs without
    KernelKB installed: the product of the shape dimensions ``dims`` (read from the op's
    inputs at ``inputs``: (input index, tensor dimension) per dim) is compared with each
    class's inclusive upper bound in order; the last class has bound None (no limit).
    ``reason`` says why the task splits there (shown in reports and the dispatch table).
    """

    dims: tuple[str, ...]
    classes: tuple[tuple[str, int | None], ...]
    reason: str
    inputs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        names = [name for name, _ in self.classes]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"regimes: names must be unique and non-empty: {names}")
        for name in names:
            if not REGIME_NAME.match(name):
                raise ValueError(f"regime name {name!r}: lower-case letters, digits, _")
        bounds = [bound for _, bound in self.classes]
        if bounds[-1] is not None or any(b is None for b in bounds[:-1]):
            raise ValueError("regimes: only the last class is unbounded (bound None)")
        finite = [b for b in bounds[:-1] if b is not None]  # all of them (checked above)
        if any(a >= b for a, b in zip(finite[:-1], finite[1:], strict=False)):
            raise ValueError(f"regimes: bounds must increase: {bounds}")
        if len(self.inputs) != len(self.dims):
            raise ValueError("regimes: one (input index, tensor dim) per dim")
        if not self.reason.strip():
            raise ValueError("regimes: say why the task splits there (reason)")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.classes)

    def of_value(self, value: int) -> str:
        for name, bound in self.classes:
            if bound is None or value <= bound:
                return name
        raise AssertionError("unreachable: the last class is unbounded")

    def rule(self) -> dict[str, Any]:
        """The JSON form an exported kernel's dispatch table carries."""
        return {"dims": list(self.dims), "inputs": [list(p) for p in self.inputs],
                "classes": [[n, b] for n, b in self.classes], "reason": self.reason}


SINGLE_REGIME = Regimes(dims=(), classes=(("all", None),), inputs=(),
                        reason="one regime: the task declares no split of its shapes")


AUTOGRAD_FORMS = "autograd forms"


@dataclass(frozen=True)
class InputCondition:
    """A condition of the inputs a correct kernel must handle: ``apply(inputs, seed)``
    returns the inputs changed (new tensors; the seed is the evaluation's own)."""

    name: str
    why: str
    apply: Callable[[tuple[Any, ...], int], tuple[Any, ...]]


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


def fused_buffer(mutated: tuple[int, ...] = ()) -> InputCondition:
    """Float inputs of the same shape and dtype (but the ones the op writes) as
    neighbouring blocks of one buffer, the way a fused projection hands them over: column
    blocks on an even seed (``gate, up = gate_up.chunk(2, -1)``), blocks of the
    next-to-last dimension on an odd one (q, k and v as heads of one qkv projection,
    ``qkv.view(b, s, 3 * h, d)``): each a view, all in one storage. A kernel that tells
    such inputs apart by their pointers or strides, or writes into one (its neighbour is
    the caller's), is wrong there."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        groups: dict[tuple[Any, ...], list[int]] = {}
        for i, x in enumerate(inputs):
            if i not in mutated and isinstance(x, torch.Tensor) and x.is_floating_point() \
                    and x.dim() >= 1 and x.numel():
                groups.setdefault((tuple(x.shape), x.dtype, x.device), []).append(i)
        out = list(inputs)
        for members in groups.values():
            if len(members) < 2:
                continue
            first = inputs[members[0]]
            dim = -2 if seed % 2 and first.dim() >= 2 else -1  # heads, or columns
            fused = torch.cat([inputs[i] for i in members], dim=dim)
            width = first.shape[dim]
            for k, i in enumerate(members):
                out[i] = fused.narrow(dim, k * width, width)
        return tuple(out)

    return InputCondition("one fused buffer", "inputs of one shape as neighbouring "
                          "column blocks of one buffer (gate_up.chunk(2, -1), a fused "
                          "qkv)", apply)


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


@dataclass(frozen=True)
class ScalarArg:
    """An argument of ``run()`` past the tensors that callers set (RMSNorm's ``eps``), in
    ``run()``'s order after the inputs ``make_inputs`` gives: its default (what every call
    without it gets) and its legal range, ``low`` to ``high`` (log-uniform when ``log``),
    or ``choices`` for a flag or an enumeration. ``typical``: values real callers pass
    (Llama's 1e-5), drawn as often as the range."""

    name: str
    default: float | int | bool
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[float | int | bool, ...] = ()
    typical: tuple[float | int | bool, ...] = ()

    def __post_init__(self) -> None:
        ranged = self.low is not None and self.high is not None
        if ranged == bool(self.choices):
            raise ValueError(f"scalar argument {self.name}: a range (low, high) or choices")
        if ranged and not (self.low < self.high and (not self.log or self.low > 0)):  # type: ignore[operator]
            raise ValueError(f"scalar argument {self.name}: low < high (and > 0 if log)")
        if not self.others():
            raise ValueError(f"scalar argument {self.name}: no legal value but its default")

    def others(self) -> tuple[float | int | bool, ...]:
        """The listed values (range ends, choices, typical ones) that are not the default."""
        ends = (self.low, self.high) if self.low is not None else ()
        listed = (*ends, *self.choices, *self.typical)
        return tuple(dict.fromkeys(v for v in listed if v is not None and v != self.default))

    def draw(self, rng: random.Random) -> float | int | bool:
        """A legal value other than the default: a listed one (an end of the range, a
        choice, a typical value) or, for a range, one drawn across it."""
        if self.choices or rng.random() < 0.5:
            return rng.choice(self.others())
        assert self.low is not None and self.high is not None
        for _ in range(8):
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high))) \
                if self.log else rng.uniform(self.low, self.high)
            if value != self.default:
                return value
        return rng.choice(self.others())


SCALAR_ARGS = "other scalar arguments"


class Keywords(dict):  # type: ignore[type-arg]
    """Arguments a check passes to ``run()`` (and to the reference) by name, as the last
    element of an input set: ``call_with`` splits them off. A condition returns one to
    call the op the way its users write it (``run(x, w, eps=1e-5)``)."""


def call_with(fn: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    """``fn(*inputs)``, a trailing ``Keywords`` passed by name."""
    args, kwargs = split_keywords(inputs)
    return fn(*args, **kwargs)


def split_keywords(inputs: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
    """(the positional inputs, the ``Keywords`` at the end or {})."""
    items = list(inputs)
    if items and isinstance(items[-1], Keywords):
        return items[:-1], dict(items[-1])
    return items, {}


def scalar_arguments(args: tuple[ScalarArg, ...],
                     declared: tuple[InputCondition, ...] = ()) -> InputCondition:
    """The task's scalar arguments (``Task.scalar_args``) passed with values other than
    their defaults, drawn over their legal ranges from the seed and the inputs' sizes (so
    each shape of an evaluation gets its own), on inputs that hold every ``declared``
    condition of the values at once (``mixed_inputs``: an ``eps`` shows only on a row
    whose mean square is near it). Every other check calls ``run(*inputs)`` with the
    defaults, and a kernel honest only there (another ``eps`` takes a PyTorch path, or
    is ignored) is seen here.

    Passed by position on an even seed and by the names the task gives them
    (``Keywords``) on an odd one: users write both (``run(x, w, 1e-5)``,
    ``run(x, w, eps=1e-5)``), and a ``run(x, w, epsilon=1e-6, **_)`` that swallows the
    task's name is right only by position. The worker gives each shape its own seed, so
    an evaluation of two shapes or more meets both forms; the judge's seeds are drawn."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        sizes = [int(x.numel()) for x in inputs if isinstance(x, torch.Tensor)]
        rng = random.Random(f"{seed}:{sizes}")
        values = [arg.draw(rng) for arg in args]
        tensors = mixed_inputs(tuple(inputs), declared, seed)
        if seed % 2:
            return (*tensors, Keywords(zip((a.name for a in args), values, strict=True)))
        return (*tensors, *values)

    names = ", ".join(a.name for a in args)
    return InputCondition(SCALAR_ARGS, f"run() called with {names} other than the default, "
                          "drawn over the legal range, by position or by name, on rows "
                          "under each of the task's conditions", apply)


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
    coords = []
    for size in reversed(shape or (1,)):
        coords.append(flat % size)
        flat //= size
    return coords[::-1]


def mixed_inputs(inputs: tuple[Any, ...], conditions: Sequence[InputCondition], seed: int
                 ) -> tuple[Any, ...]:
    """One input set that holds every condition of the values at once. Each condition is
    applied (the k-th with seed + k, so two that pick a row from the seed pick other rows)
    and kept where it changes values only (the same tensors' shapes, strides and dtypes,
    the same other arguments: not a layout, not another argument). Then each tensor
    input's rows (its first dimension) are the plain ones and those of the conditions
    that change every row, in turn, and a condition that changes some rows only (a zero
    row) has those rows as it made them."""
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
        for k, whole in enumerate(every):
            y[k::len(every)] = whole[k::len(every)]
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
    strided_rows, column_major, offset_views, broadcast_rows, fused_buffer, grad_inputs)
) | {NONFINITE}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    """triton.next_power_of_2, without triton (this runs in retrieval tests too)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def vector_width(elements: int, threads: int, bytes_per_element: int) -> int:
    """Contiguous elements per thread and access: a tile spread over the threads, at most
    16 bytes (one 128-bit load)."""
    return max(1, min(elements // max(1, threads), 16 // bytes_per_element))


def generic_launch(task: Task, config: Config, shape: Shape, dtype: str = "float16") -> Launch:
    """A Launch from common knob names, for a task that does not define its own.

    Assumes: NUM_WARPS warps of 32 threads (4 if absent); each program produces the
    product of the positive BLOCK_* values (BLOCK_K excluded: a reduction step) times
    ROWS_PER_PROGRAM / HEADS_PER_PROGRAM elements, and the op writes as many elements as it
    reads (bytes_moved / 2 / element size), so programs = ceil(that / work per program);
    the tile (those elements in fp32, times NUM_STAGES) lives in registers. A BLOCK_* of 0
    ("whole row") counts as the last shape dimension. Wrong for ops whose output is not
    their input's size (a matmul): such a task should pass its own ``launch``.
    """
    cfg = {**task.default_config, **config}
    size = DTYPES[dtype].itemsize
    warps = int(cfg.get("NUM_WARPS", 4))
    stages = int(cfg.get("NUM_STAGES", 1))
    tile = 1
    for name, value in cfg.items():
        if name.startswith("BLOCK") and name != "BLOCK_K" and isinstance(value, int) \
                and not isinstance(value, bool):
            tile *= value if value > 0 else int(shape[-1])
    per_program = tile * int(cfg.get("ROWS_PER_PROGRAM", 1)) * int(cfg.get("HEADS_PER_PROGRAM", 1))
    total = max(1, task.bytes_moved(shape, DTYPES[dtype]) // (2 * size))
    return Launch(programs=max(1, math.ceil(total / per_program)), threads_per_program=warps * 32,
                  elements_per_program=min(per_program, total), bytes_per_element=size,
                  tile_bytes=tile * 4 * stages, num_stages=stages,
                  vector_width=vector_width(tile, warps * 32, size))


@dataclass(frozen=True)
class Task:
    """One op to optimize, declared in one file (README "Adding a task"). Every field is
    checked when the task is built (kernels/validation.py): a required one left out or a
    wrong one raises TaskDefinitionError naming the task and the field."""

    name: str = MISSING
    op_type: str = MISSING
    description: str = MISSING
    signature: str = MISSING  # run()'s signature as the agent should keep it, "run(x) -> y"
    reference: Callable[..., Any] = MISSING
    # make_inputs(shape, dtype, seed, device): seeded, drawn on the device itself (a CPU
    # draw of a 100M-element input costs seconds per input set on a GPU host)
    make_inputs: Callable[[Shape, torch.dtype, int, str], tuple[Any, ...]] = MISSING
    shape_names: tuple[str, ...] = MISSING  # e.g. ("rows", "cols")
    sweep_shapes: tuple[Shape, ...] = MISSING  # what a GPU run tunes and sweeps
    edge_shapes: tuple[Shape, ...] = MISSING  # size 1, non-powers of two, under a block
    cpu_shapes: tuple[Shape, ...] = MISSING  # small ones for the CPU interpreter
    dtypes: tuple[str, ...] = MISSING
    tolerances: Mapping[str, Tolerance] = MISSING
    bytes_moved: Callable[[Shape, torch.dtype], int] = MISSING
    flops: Callable[[Shape, torch.dtype], int] = MISSING
    # candidate module source (read_template: a real .py file); header constants = config
    template: str = MISSING
    knobs: tuple[Knob, ...] = MISSING
    variants: tuple[Variant, ...] = ()
    related_ops: tuple[str, ...] = ()  # for cross-task transfer in retrieval
    # A configuration is legal unless this says why not (e.g. a tile over smem budget).
    constraint: Callable[[Config], str | None] = field(default=lambda cfg: None)
    compute_bound: bool = False  # roofline: compare against FLOP/s rather than bytes/s
    # Indices of inputs the op writes on purpose (e.g. a KV cache): a checker runs the
    # reference and the candidate on separate clones and compares these inputs afterwards.
    mutated_inputs: tuple[int, ...] = ()
    # Shared memory one program of a configuration needs on a shape, in bytes, predicted
    # from its tiles, stages and dtype (0: a kernel that stages nothing there). Compared
    # with a GPU's per-block limit (kernels/resources.py) it marks points that cannot run.
    smem_bytes: Callable[[Config, Shape, torch.dtype], int] = field(
        default=lambda cfg, shape, dtype: 0)
    # launch(config, shape, dtype="float16") -> Launch: grid, threads, work and tile of a
    # configuration on a shape, for the learned ranker; None = generic_launch (knob names)
    launch: Callable[..., Launch] | None = field(default=None, repr=False, compare=False)
    # peers() -> [kernels.peers.Peer]: what a user would call instead of this kernel, timed
    # at the end of a GPU run; None = the reference eager and under torch.compile
    peers: Callable[[], Sequence[Any]] | None = field(default=None, repr=False, compare=False)
    # How shapes fall into regimes (row-length classes, M buckets, prefill vs decode): the
    # loop tunes each regime of the sweep and the exported kernel dispatches on it
    regimes: Regimes = SINGLE_REGIME
    # A sweep shape's weight in a round's objective (the weighted geometric mean of GPU
    # times): how often a model calls it, say. Edge shapes are checked, never timed.
    objective_weight: Callable[[Shape], float] = field(default=lambda shape: 1.0,
                                                       repr=False, compare=False)
    # Input conditions the op's users meet that the plain draw hides (large logits, a
    # zero row, positions that are not contiguous): every evaluation checks each one on
    # every shape besides the seeds (optimizer/sandbox/worker.py)
    input_conditions: tuple[InputCondition, ...] = ()
    # run()'s arguments past the tensors make_inputs gives (RMSNorm's eps), in run()'s order:
    # every evaluation also calls run() with them drawn over their legal range
    # (scalar_arguments), a condition added to the declared ones
    scalar_args: tuple[ScalarArg, ...] = ()
    # the op is also checked on rows of a wider buffer (strided_rows), a condition added to
    # the declared ones; False only for an op whose signature takes contiguous tensors
    strided_rows: bool = True
    # the judge also checks one shape no list names, drawn within the lists' bounds
    # (kernels/drawn_shapes.py); False only for an op whose shapes are a closed set
    drawn_shapes: bool = True
    # non-finite values the op's first float input may hold, with a result the reference
    # defines (nonfinite_values, a condition added to the declared ones): NaN by default;
    # () for an op whose answer there depends on the algorithm (attention: a NaN in a
    # key block a causal kernel skips)
    nonfinite: tuple[float, ...] = (math.nan,)
    # the judge also calls run() once with zero rows (the first shape dimension 0) where
    # the reference takes them; False only for an op whose first dimension is no batch
    empty_batch: bool = True
    # inputs callers may keep in float32 beside half-precision activations (a norm's
    # weight), which the reference takes: checked so (float32_weights, a condition
    # added to the declared ones)
    float32_inputs: tuple[int, ...] = ()
    # inputs whose rows the op takes as any leading dimensions (a model's (batch, seq,
    # hidden) activations), which the reference takes: the judge's last check calls the
    # op so (leading_dims)
    leading_dims: tuple[int, ...] = ()
    # the op takes input-free factors callers compute in PyTorch (RoPE's inverse
    # frequencies, cos/sin of positions), which a kernel may read as constants; elsewhere
    # a constant PyTorch computed that reaches an output is compute (the Triton-only rule)
    torch_constants: bool = False
    # where the template was read from (read_template; None: written inline)
    template_path: str | None = field(default=None, init=False, compare=False)

    @property
    def params(self) -> tuple[Knob | Variant, ...]:
        """Every parameter of the space: the knobs, then the variants."""
        return (*self.knobs, *self.variants)

    def __post_init__(self) -> None:
        object.__setattr__(self, "template_path", getattr(self.template, "path", None))
        named = {c.name for c in self.input_conditions}
        generic = [make(self.mutated_inputs) for make in (
            (strided_rows, column_major, offset_views, broadcast_rows, fused_buffer)
            if self.strided_rows else ()) + (grad_inputs,)
            if make(self.mutated_inputs).name not in named]
        if self.nonfinite and NONFINITE not in named:
            # before the layouts: the latest call's inputs, which the partly repeated
            # check writes half of again, hold plain values (grad inputs come last)
            generic.insert(0, nonfinite_values(tuple(self.nonfinite), self.mutated_inputs))
        if self.float32_inputs and FLOAT32_INPUTS not in named:
            generic.append(float32_weights(tuple(self.float32_inputs)))
        if self.scalar_args and SCALAR_ARGS not in named:
            generic.insert(0, scalar_arguments(tuple(self.scalar_args),
                                               tuple(self.input_conditions)))
        object.__setattr__(self, "input_conditions", (*self.input_conditions, *generic))
        validate(self, DTYPES, header_constants)
        own = self.launch  # the task's launch sees a whole config (defaults filled in)
        object.__setattr__(self, "launch", lambda config, shape, dtype="float16": (
            own({**self.default_config, **config}, tuple(shape), dtype) if own else
            generic_launch(self, config, tuple(shape), dtype)))

    # -- search space -------------------------------------------------------------
    @property
    def default_config(self) -> dict[str, ConfigValue]:
        """The naive kernel's configuration, as written in the template."""
        header = header_constants(self.template)
        return {p.name: header[p.name] for p in self.params}

    def complete(self, config: Config) -> dict[str, ConfigValue] | None:
        """A stored configuration as a whole point of the space: a variant missing from it
        (added to the task after it was measured) takes its first value, which is the
        kernel as it was; None if a knob is missing or a name is not the task's."""
        names = {p.name for p in self.params}
        knobs = {k.name for k in self.knobs}
        if not set(config) <= names or not knobs <= set(config):
            return None
        return {**{v.name: v.values[0] for v in self.variants}, **config}

    def space(self, smem_limit: int | None = None) -> Iterator[dict[str, ConfigValue]]:
        """Every legal point of variants x knobs (the exhaustive grid); with a GPU's
        shared-memory limit per block, only the points that fit it."""
        params: tuple[Knob | Variant, ...] = (*self.variants, *self.knobs)
        for values in itertools.product(*(p.values for p in params)):
            cfg = dict(zip((p.name for p in params), values, strict=True))
            if self.why_illegal(cfg, smem_limit) is None:
                yield cfg

    def smem_need(self, config: Config, shapes: tuple[Shape, ...] | None = None,
                  dtypes: tuple[str, ...] | None = None) -> int:
        """The most shared memory ``config`` needs over shapes x dtypes (default: every
        shape and dtype of the task: a candidate must run them all): the task's model plus
        the scratch that reductions and layout conversions take (up to 1 KiB a warp, seen
        on the H200 for row reductions over unaligned rows)."""
        cfg = {**self.default_config, **config}
        shapes = shapes or (*self.edge_shapes, *self.sweep_shapes, *self.cpu_shapes)
        staged = max(self.smem_bytes(cfg, shape, DTYPES[d])
                     for shape in shapes for d in (dtypes or self.dtypes))
        return staged + SCRATCH_PER_WARP * int(cfg.get("NUM_WARPS", 4))

    def infeasible(self, config: Config, smem_limit: int | None,
                   shapes: tuple[Shape, ...] | None = None,
                   dtypes: tuple[str, ...] | None = None) -> str | None:
        """Why ``config`` cannot run on a GPU with ``smem_limit`` bytes of shared memory per
        block (None: it fits, or the limit is unknown)."""
        if smem_limit is None:
            return None
        need = self.smem_need(config, shapes, dtypes)
        if need <= smem_limit:
            return None
        return (f"needs {need // 1024} KiB of shared memory per program (predicted from its "
                f"tiles and stages), over the GPU's {smem_limit // 1024} KiB per block")

    def why_illegal(self, config: Config, smem_limit: int | None = None) -> str | None:
        """The task's constraint, then the GPU's shared memory: None if ``config`` may run."""
        return self.constraint(config) or self.infeasible(config, smem_limit)

    def render(self, config: Config) -> str:
        """Candidate source for a configuration: the template with its header rewritten."""
        known = {p.name: p for p in self.params}
        for name, value in config.items():
            if name not in known:
                raise KeyError(f"task {self.name}: unknown parameter {name}")
            if value not in known[name].values:
                raise ValueError(f"task {self.name}: {name}={value!r} not in {known[name].values}")
        reason = self.constraint({**self.default_config, **config})
        if reason:
            raise ValueError(f"task {self.name}: illegal config: {reason}")
        return set_header_constants(self.template, config)

    def shapes(self, which: str) -> tuple[Shape, ...]:
        """Shape sets by name: sweep, edge, cpu, all (= edge + sweep), representative
        (smallest, median and largest sweep shape by bytes moved) and tune (= edge +
        representative: what each optimizer round checks and times on a GPU, the whole
        sweep being kept for the end of a run)."""
        sets = {"sweep": self.sweep_shapes, "edge": self.edge_shapes, "cpu": self.cpu_shapes}
        if which == "all":
            return (*self.edge_shapes, *self.sweep_shapes)
        if which == "representative":
            by_size = sorted(self.sweep_shapes, key=lambda s: self.bytes_moved(s, torch.float16))
            return tuple(dict.fromkeys((by_size[0], by_size[len(by_size) // 2], by_size[-1])))
        if which == "tune":
            return (*self.edge_shapes, *self.shapes("representative"))
        return sets[which]

    def regime(self, shape: Shape) -> str:
        """The regime a shape falls in (``Regimes``: product of its dims vs the bounds)."""
        value = 1
        for dim in self.regimes.dims:
            value *= int(shape[self.shape_names.index(dim)])
        return self.regimes.of_value(value)

    def shapes_by_regime(self, shapes: tuple[Shape, ...] | list[Shape]) -> dict[str, list[Shape]]:
        """``shapes`` grouped by regime, in the task's regime order (empty ones left out)."""
        groups: dict[str, list[Shape]] = {name: [] for name in self.regimes.names}
        for shape in shapes:
            groups[self.regime(tuple(shape))].append(tuple(shape))
        return {name: group for name, group in groups.items() if group}

    def shape_label(self, shape: Shape) -> str:
        return ",".join(f"{n}={v}" for n, v in zip(self.shape_names, shape, strict=True))

    def parse_shape(self, label: str) -> Shape:
        """The inverse of shape_label: "rows=4,cols=128" -> (4, 128); ValueError else."""
        pairs = dict(part.split("=", 1) for part in label.split(",") if "=" in part)
        try:
            return tuple(int(pairs[name]) for name in self.shape_names)
        except (KeyError, ValueError):
            raise ValueError(f"task {self.name}: {label!r} is not a {self.shape_names} shape"
                             ) from None


_HEADER_LINE = HEADER_LINE


def header_constants(source: str) -> dict[str, ConfigValue]:
    """Top-level ``NAME = literal`` lines of a candidate: its configuration."""
    found: dict[str, ConfigValue] = {}
    for line in source.splitlines():
        match = _HEADER_LINE.match(line)
        if not match:
            continue
        text = match.group(2)
        try:
            value = _literal(text)
        except ValueError:
            continue
        found[match.group(1)] = value
    return found


def set_header_constants(source: str, config: Config) -> str:
    """Rewrite ``NAME = ...`` header lines, keeping their trailing comments (the
    exported kernels' dispatch runtime renders with the same function)."""
    return dispatch_render(source, config)


_literal = header_literal  # the value of a header line's literal


# -- templates ------------------------------------------------------------------------
class TemplateText(str):
    """A kernel template's source text that remembers the file it was read from."""

    path: str

    def __new__(cls, text: str, path: str) -> TemplateText:
        made = super().__new__(cls, text)
        made.path = path
        return made

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # pickling
        return str(self), self.path


def read_template(anchor: str, name: str | None = None) -> TemplateText:
    """The kernel template of the task defined in file ``anchor`` (pass ``__file__``):
    ``templates/<name>.py`` beside it, ``name`` defaulting to that file's own name. A real
    .py file, so linters and editors see the kernel; read as text, its header constants
    rewritten for each configuration (``Task.render``)."""
    base = os.path.dirname(os.path.abspath(anchor))
    stem = name or os.path.splitext(os.path.basename(anchor))[0]
    path = os.path.join(base, "templates", stem if stem.endswith(".py") else f"{stem}.py")
    try:
        with open(path, encoding="utf-8") as handle:
            return TemplateText(handle.read(), path)
    except OSError as err:
        raise TaskDefinitionError(stem, "template", f"cannot read {path}: {err.strerror}"
                                  ) from None


# -- registry -------------------------------------------------------------------------
# name -> Task, in the order tasks registered; filled by kernels/discovery.py (every task
# module of this package, the folders a user names, the kernelkb.tasks entry points).
TASKS: dict[str, Task] = {}


def register(task: Task) -> Task:
    """Add a task (a task module may call this, or just define a module-level Task)."""
    from kernelkb.kernels import discovery

    if TASKS.get(task.name) is task:
        return task
    origin = discovery.loading()
    if task.name in TASKS:
        raise TaskDefinitionError(task.name, "name", (
            f"taken: {discovery.describe(task.name)} registered it first"
            + (f"; {origin.describe()} cannot" if origin else "")))
    TASKS[task.name] = task
    discovery.note_origin(task.name, origin)
    return task


class UnknownTask(UserError, KeyError):
    """A task name nobody registered (a KeyError, as a registry lookup is)."""

    def __str__(self) -> str:  # the message itself, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""


def get_task(name: str) -> Task:
    """The task called ``name``; UnknownTask (a KeyError) naming the known ones and the
    closest."""
    if name not in TASKS:
        from kernelkb.kernels import discovery

        discovery.discover()
    try:
        return TASKS[name]
    except KeyError:
        raise UnknownTask(f"unknown task {name!r}{closest(name, TASKS) or ';'} known: "
                          f"{', '.join(sorted(TASKS))}") from None


def all_tasks() -> dict[str, Task]:
    """Every task: this package's, the named folders', the installed entry points'."""
    from kernelkb.kernels import discovery

    discovery.discover()
    return dict(TASKS)


def related_ops_of(op_type: str) -> tuple[str, ...]:
    """The ops the registered tasks of ``op_type`` declare related (``Task.related_ops``,
    the one source of truth), first-declared first; what entry modules put on a query
    that names an op but no task object."""
    found: dict[str, None] = {}
    for task in all_tasks().values():
        if task.op_type == op_type:
            found.update(dict.fromkeys(op for op in task.related_ops if op != op_type))
    return tuple(found)


def record_launch(record: Any, shape_label: str) -> Launch | None:
    """``launch_of`` for the learned ranker (retrieval/ranker.py): the Launch of an
    experience record's configuration on one of its shapes, for a registered task (None
    for another task, a shape set name such as "sweep", or a config the task rejects)."""
    try:
        task = get_task(record.task.task_id)
        dtype = record.task.dtype if record.task.dtype in DTYPES else "float16"
        assert task.launch is not None  # Task.__post_init__ always sets one
        return task.launch(dict(record.edit.config), task.parse_shape(shape_label), dtype)
    except (KeyError, ValueError, TypeError):
        return None


def record_regime(record: Any) -> str | None:
    """An experience record's regime: the one it recorded, else derived from the shapes it
    was timed or checked on (its timings, else the labels of its shape set), joined with
    "+" in the task's order when they span several; None for a task not registered here
    or a record that names no parsable shape (imported data, shape sets such as "tune")."""
    if getattr(record.task, "regime", None):
        return record.task.regime
    try:
        task = get_task(record.task.task_id)
    except KeyError:
        return None
    labels = [t.shape for t in record.feedback.timings] or \
        record.task.shape_set.split(":", 1)[-1].split(";")
    found = set()
    for label in labels:
        try:
            found.add(task.regime(task.parse_shape(label)))
        except ValueError:
            continue
    return "+".join(n for n in task.regimes.names if n in found) or None


class RecordRegimes:
    """``record_regime`` for the store (kb.service.RegimeSource): the registered
    tasks and the derivation, given to LocalKnowledge by the entry modules."""

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(all_tasks())

    def of(self, record: Any) -> str | None:
        return record_regime(record)


def record_cost(record: Any, shape_label: str) -> tuple[float | None, float | None]:
    """``cost_of`` for the ranker: (bytes moved, flops) of a record's shape, or Nones."""
    try:
        task = get_task(record.task.task_id)
        shape = task.parse_shape(shape_label)
        dtype = DTYPES.get(record.task.dtype, torch.float16)
        return float(task.bytes_moved(shape, dtype)), float(task.flops(shape, dtype))
    except (KeyError, ValueError):
        return None, None


def load_candidate(source: str, module_name: str = "candidate") -> Any:
    """Import a candidate's source as a module. Triton's @jit needs a real file, kept
    while the process lives (see ``_candidate_folder``)."""
    import importlib.util

    # a folder per load keeps the file's name (error messages point into "candidate.py")
    path = _candidate_folder() / str(next(_CANDIDATE_SERIAL)) / f"{module_name}.py"
    path.parent.mkdir()
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, "run", None)):
        raise AttributeError("candidate defines no run(...) function")
    return module


_CANDIDATE_SERIAL = itertools.count()
_candidate_home: Path | None = None


def _candidate_folder() -> Path:
    """One folder per process under the temp dir, removed at exit; folders of processes
    that died without exiting (a sandbox worker killed for a hang) are removed by the
    next process that loads a candidate. Why: a folder per candidate was never removed,
    and a day of tests and optimize runs left tens of thousands behind."""
    global _candidate_home
    if _candidate_home is None or _candidate_home.name != str(os.getpid()):  # or forked
        import atexit
        import shutil
        import tempfile

        root = Path(tempfile.gettempdir()) / "kernelkb-candidates"
        root.mkdir(exist_ok=True)
        for folder in root.iterdir():
            if folder.name.isdigit() and not _alive(int(folder.name)):
                shutil.rmtree(folder, ignore_errors=True)
        _candidate_home = root / str(os.getpid())
        _candidate_home.mkdir(exist_ok=True)
        atexit.register(shutil.rmtree, _candidate_home, True)
    return _candidate_home


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
