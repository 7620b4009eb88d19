"""Correctness statistics and the guards against results that only look good.

Errors are measured on a float64 upcast against the task's reference. A shape passes
only when no element is over ``atol + rtol * |ref|`` (so a kernel right on average but
wrong at one edge fails), a NaN or an inf comes out exactly where the reference has one
(a NaN where it has a NaN, the same inf where it has an inf), and the relative signed
mean error (the bias) stays under ``max_bias`` (so a small systematic drift that hides
under the elementwise rule fails). The bias is the signed mean error over the mean
|reference|, per shape, with no floor: a floor at ``atol`` hid a 1% drift of softmax's
probabilities on long rows (each ~1/cols, far under fp16's atol). It is a drift only
where it is also more than noise: either material (over ``max_bias * atol`` in absolute
terms) or, over at least ``BIAS_MIN_ELEMENTS`` elements, more than ``BIAS_Z`` standard
errors of the mean error from 0. So an output of 0 where the reference underflows to
1e-28 is no drift, and a small drift on every element of a long row is.
The guards compare the candidate's inputs with saved copies, look for outputs sharing
storage with inputs or with earlier outputs, and spot outputs replayed from a cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class ErrorStats:
    max_abs_err: float
    max_rel_err: float
    mean_abs_err: float
    bias: float
    mismatch_share: float
    mismatches: int
    elements: int
    first_mismatch: tuple[int, ...] | None  # coordinates inside first_output
    nonfinite: int  # NaN / inf in the output where the reference is finite
    first_output: int | None = None  # which output (for ops returning several)
    outputs: int = 1
    mean_err: float = 0.0  # signed mean error, absolute
    bias_z: float = 0.0  # the mean error in standard errors (0 under BIAS_MIN_ELEMENTS)
    atol: float = 0.0  # the absolute tolerance the statistics were read against

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def flatten_tensors(value: Any) -> list[torch.Tensor]:
    """Outputs may be a tensor or a (nested) tuple / list of tensors."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flatten_tensors(item)]
    return []


BIAS_Z = 6.0  # standard errors of the mean error: a drift, not rounding noise
BIAS_MIN_ELEMENTS = 64  # fewer elements say nothing of a mean (the elementwise rule does)
CHUNK = 1 << 24  # elements per float64 pass: bounded temporaries on any output size


def error_stats(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> ErrorStats:
    """Elementwise error statistics; relative error uses max(|ref|, atol) as denominator
    so that near-zero reference values do not turn rounding noise into huge ratios.

    Computed on the output's device in float64 chunks: on a GPU a pass over a
    134M-element output takes milliseconds (on the host CPU it took seconds and
    dominated a round), and the chunks keep memory flat when many sandboxes share one GPU.
    """
    return _stats_over([out], [ref], atol, rtol)


def _stats_over(outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor], atol: float,
                rtol: float) -> ErrorStats:
    """One set of statistics over several outputs, the first mismatch located by output
    and by coordinates inside it (not by a flat offset into all outputs joined)."""
    acc = _Accumulator()
    first: tuple[int, ...] | None = None
    first_output: int | None = None
    elements = 0
    for index, (out, ref) in enumerate(zip(outs, refs, strict=True)):
        o_all = out.detach().reshape(-1)
        r_all = ref.detach().to(o_all.device).reshape(-1)
        acc.first_over = None
        for start in range(0, o_all.numel(), CHUNK):
            acc.add(o_all[start:start + CHUNK].double(), r_all[start:start + CHUNK].double(),
                    start, atol, rtol)
        if acc.first_over is not None and first is None:
            first = tuple(int(i) for i in _unravel(acc.first_over, tuple(out.shape)))
            first_output = index
        elements += o_all.numel()
    count = acc.over
    mean_ref = acc.ref_abs_sum / acc.ref_finite if acc.ref_finite else 0.0
    mean_err = acc.diff_sum / acc.finite if acc.finite else 0.0
    scale = mean_ref if mean_ref > 0 else atol
    z = 0.0
    if acc.finite >= BIAS_MIN_ELEMENTS and mean_err:
        variance = max(acc.sq_sum / acc.finite - mean_err * mean_err, 0.0)
        sem = (variance / (acc.finite - 1)) ** 0.5
        z = mean_err / sem if sem > 0 else math.copysign(math.inf, mean_err)
    return ErrorStats(
        max_abs_err=acc.max_abs, max_rel_err=acc.max_rel,
        mean_abs_err=acc.abs_sum / acc.finite if acc.finite else 0.0,
        bias=mean_err / scale if scale > 0 else 0.0,
        mismatch_share=count / max(1, elements), mismatches=count,
        elements=elements, first_mismatch=first, nonfinite=acc.nonfinite,
        first_output=first_output, outputs=len(outs), mean_err=mean_err, bias_z=z,
        atol=atol,
    )


class _Accumulator:
    """Running sums and extremes of the error over the chunks of one output."""

    def __init__(self) -> None:
        self.max_abs = self.max_rel = self.abs_sum = self.diff_sum = self.ref_abs_sum = 0.0
        self.sq_sum = 0.0
        self.finite = self.ref_finite = self.over = self.nonfinite = 0
        self.first_over: int | None = None

    def add(self, o: torch.Tensor, r: torch.Tensor, offset: int, atol: float,
            rtol: float) -> None:
        diff = o - r
        finite_ref = torch.isfinite(r)
        # an inf where the reference has the same inf, a NaN where it has a NaN: equal; a
        # finite value where it has either is over any tolerance (diff NaN or inf)
        both_nonfinite_equal = ~finite_ref & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
        diff = torch.where(both_nonfinite_equal, torch.zeros_like(diff), diff)
        absdiff = diff.abs().nan_to_num(nan=float("inf"))
        self.nonfinite += int((~torch.isfinite(o) & finite_ref).sum())
        over = absdiff > atol + rtol * r.abs().nan_to_num(posinf=0.0)
        over &= ~both_nonfinite_equal
        n_over = int(over.sum())
        if n_over and self.first_over is None:
            self.first_over = offset + int(over.nonzero()[0, 0])
        self.over += n_over
        finite = torch.isfinite(absdiff)
        fin_diff = diff[finite]
        self.finite += fin_diff.numel()
        self.abs_sum += float(fin_diff.abs().sum())
        self.diff_sum += float(fin_diff.sum())
        self.sq_sum += float((fin_diff * fin_diff).sum())
        self.ref_finite += int(finite_ref.sum())
        self.ref_abs_sum += float(r[finite_ref].abs().sum())
        if absdiff.numel():
            self.max_abs = max(self.max_abs, float(absdiff.max()))
            rel = absdiff / r.abs().clamp_min(max(atol, 1e-12))
            self.max_rel = max(self.max_rel, float(rel.max()))


def _unravel(index: int, shape: tuple[int, ...]) -> list[int]:
    return [int(i) for i in np.unravel_index(index, shape or (1,))]


def compare_outputs(out: Any, ref: Any, atol: float, rtol: float) -> ErrorStats | str:
    """Stats over all output tensors together, or a message when the structure differs."""
    outs, refs = flatten_tensors(out), flatten_tensors(ref)
    if len(outs) != len(refs):
        return f"returned {len(outs)} tensor(s), the reference returns {len(refs)}"
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if tuple(o.shape) != tuple(r.shape):
            return f"output {i} has shape {tuple(o.shape)}, expected {tuple(r.shape)}"
        if o.dtype != r.dtype:
            return f"output {i} has dtype {o.dtype}, expected {r.dtype}"
    return _stats_over(outs, refs, atol, rtol)


def layout_problem(outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor],
                   inputs: Sequence[Any]) -> str | None:
    """Why an output's layout is one no caller expects, or None. Each output must be
    row-major, laid out as the reference's, or as an input of its shape is (what
    ``torch.empty_like`` gives, as PyTorch's own elementwise ops do): right values in a
    transposed buffer for a row-major input make a caller's ``.view()`` fail and code
    that reads the storage in order read it transposed."""
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if o.is_contiguous() or _same_strides(o, r) or any(
                isinstance(x, torch.Tensor) and x.shape == o.shape and _same_strides(o, x)
                for x in inputs):
            continue
        return (f"output {i} has strides {o.stride()}: neither row-major, nor the "
                f"reference's {r.stride()}, nor an input's of its shape")
    return None


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same layout where it matters: strides of dimensions longer than 1 equal."""
    return a.shape == b.shape and all(
        sa == sb for n, sa, sb in zip(a.shape, a.stride(), b.stride(), strict=True) if n > 1)


def plain_tensor_problem(value: Any) -> str | None:
    """Outputs must be plain tensors: a Tensor subclass can override the very operations
    the checks run on it (``__torch_function__``) and answer them falsely."""
    for i, t in enumerate(flatten_tensors(value)):
        if type(t) is not torch.Tensor:
            return (f"output {i} is a {type(t).__module__}.{type(t).__name__}, not a plain "
                    "torch.Tensor")
    return None


def shape_verdict(stats: ErrorStats, max_bias: float) -> str | None:
    """None when the shape passes, else wrong_result or bias (a relative drift over
    ``max_bias`` that is material or significant: module docstring)."""
    if stats.mismatches or stats.nonfinite:
        return "wrong_result"
    if abs(stats.bias) > max_bias and (abs(stats.mean_err) > max_bias * stats.atol
                                       or abs(stats.bias_z) > BIAS_Z):
        return "bias"
    return None


def mismatch_location(stats: ErrorStats) -> str:
    """'output 1, row 3, column 5' (2-D), 'output 0, index (0, 2, 1, 7)' (n-D); the output
    is named only when the op returns several."""
    coords = stats.first_mismatch or ()
    parts = [f"output {stats.first_output}"] if stats.outputs > 1 else []
    if len(coords) == 2:
        parts.append(f"row {coords[0]}, column {coords[1]}")
    elif len(coords) == 1:
        parts.append(f"element {coords[0]}")
    else:
        parts.append(f"index {tuple(coords)}")
    return ", ".join(parts)


def describe_failure(kind: str, label: str, stats: ErrorStats, max_bias: float) -> str:
    if kind == "bias":
        return (f"({label}): systematic bias {stats.bias:+.2e} of the mean |reference| "
                f"(limit {max_bias:.0e}; {stats.bias_z:+.0f} standard errors from 0), "
                "although every element is within tolerance")
    where = f", first at {mismatch_location(stats)}" if stats.first_mismatch else ""
    nan = f", {stats.nonfinite} NaN/inf" if stats.nonfinite else ""
    return (f"({label}): {stats.mismatches} of {stats.elements} elements over tolerance"
            f"{where}{nan}; max abs err {stats.max_abs_err:.3g}")


# -- guards ---------------------------------------------------------------------------
def snapshot(inputs: Sequence[Any]) -> list[Any]:
    return [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equality that treats identical NaN payloads as equal."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(_dense(a).view(torch.uint8), _dense(b).view(torch.uint8))


def _dense(t: torch.Tensor) -> torch.Tensor:
    """A fresh copy with unit strides (``.contiguous()`` keeps a size-1 view's stride,
    which a byte view refuses)."""
    return torch.empty(t.shape, dtype=t.dtype, device=t.device).copy_(t)


def modified_inputs(inputs: Sequence[Any], saved: Sequence[Any],
                    expected: dict[int, Any] | None = None) -> list[int]:
    """Indices of tensor inputs that changed. ``expected`` maps inputs the task mutates on
    purpose (e.g. a KV cache) to their state after the reference ran."""
    expected = expected or {}
    changed = []
    for i, (now, before) in enumerate(zip(inputs, saved, strict=True)):
        if not isinstance(now, torch.Tensor):
            continue
        target = expected.get(i, before)
        same = bitwise_equal(now, target) if i not in expected else torch.allclose(
            now.double(), target.double(), atol=1e-2, rtol=1e-2, equal_nan=True)
        if not same:
            changed.append(i)
    return changed


def surroundings(inputs: Sequence[Any]) -> list[list[tuple[int, torch.Tensor]]]:
    """A copy of the bytes of each tensor input's storage that its view does not show:
    before and after a contiguous view (a slice's neighbours, a guard region), or the
    whole storage of a strided one (the padding between rows, the element past a strided
    weight's last). They are the caller's memory as much as the view is: a fused
    projection's next tensor, a KV cache's next block."""
    return [[(start, _storage_bytes(x)[start:end].clone()) for start, end in _unseen(x)]
            if isinstance(x, torch.Tensor) else [] for x in inputs]


def written_around(inputs: Sequence[Any], saved: Sequence[list[tuple[int, torch.Tensor]]],
                   skip: Sequence[int] = ()) -> list[int]:
    """Indices of tensor inputs (but ``skip``, the ones the op writes) whose storage
    outside the view changed since ``surroundings`` saved it."""
    changed = []
    for i, (x, pieces) in enumerate(zip(inputs, saved, strict=True)):
        if i in skip or not pieces:
            continue
        whole = _storage_bytes(x)
        if any(not torch.equal(whole[start:start + len(piece)], piece)
               for start, piece in pieces):
            changed.append(i)
    return changed


def grads(inputs: Sequence[Any]) -> list[torch.Tensor | None]:
    """A copy of each tensor input's ``.grad`` (a weight's accumulated gradient, as a
    training step with gradient accumulation hands it over), None where it has none."""
    return [x.grad.detach().clone() if isinstance(x, torch.Tensor) and x.grad is not None
            else None for x in inputs]


def grads_written(inputs: Sequence[Any], saved: Sequence[torch.Tensor | None]) -> list[int]:
    """Indices of inputs whose ``.grad`` changed (or went) since ``grads`` saved it: the
    caller's gradient is its memory, not a scratch buffer."""
    return [i for i, (x, before) in enumerate(zip(inputs, saved, strict=True))
            if before is not None and (x.grad is None or not bitwise_equal(x.grad, before))]


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _unseen(t: torch.Tensor) -> list[tuple[int, int]]:
    """[start, end) byte ranges of ``t``'s storage to keep: around a contiguous view, the
    whole storage of any other (its gaps are inside)."""
    size = t.untyped_storage().nbytes()
    if t.numel() and not t.is_contiguous():
        return [(0, size)]
    start = int(t.storage_offset()) * t.element_size()
    end = start + t.numel() * t.element_size()
    return [(a, b) for a, b in ((0, start), (end, size)) if b > a]


def _span(t: torch.Tensor) -> tuple[int, int]:
    start = t.data_ptr()
    if t.numel() == 0:
        return start, start
    last = sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True))
    return start, start + (last + 1) * t.element_size()


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0 or a.device != b.device:
        return False
    (a0, a1), (b0, b1) = _span(a), _span(b)
    return a0 < b1 and b0 < a1


def aliasing(outs: Sequence[torch.Tensor], inputs: Sequence[Any],
             earlier_outs: Sequence[torch.Tensor]) -> str | None:
    """Why an output shares memory with an input or with a still-alive earlier output."""
    for i, out in enumerate(outs):
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and overlaps(out, x):
                return f"output {i} shares memory with input {j}"
        for old in earlier_outs:
            if overlaps(out, old):
                return f"output {i} reuses the buffer of an earlier call's output"
    return None
