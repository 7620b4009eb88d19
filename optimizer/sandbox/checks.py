"""Correctness statistics and the guards against results that only look good.

Errors are measured on a float64 upcast against the task's reference. A shape passes
only when no element is over ``atol + rtol * |ref|`` (so a kernel right on average but
wrong at one edge fails) and the relative signed mean error (the bias) stays under
``max_bias`` (so a small systematic drift that hides under the elementwise rule fails).
The guards compare the candidate's inputs with saved copies, look for outputs sharing
storage with inputs or with earlier outputs, and spot outputs replayed from a cache.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
    first_mismatch: tuple[int, ...] | None
    nonfinite: int  # NaN / inf in the output where the reference is finite

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def flatten_tensors(value: Any) -> list[torch.Tensor]:
    """Outputs may be a tensor or a (nested) tuple / list of tensors."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in flatten_tensors(item)]
    return []


def error_stats(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> ErrorStats:
    """Elementwise error statistics; relative error uses max(|ref|, atol) as denominator
    so that near-zero reference values do not turn rounding noise into huge ratios."""
    o = out.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    diff = o - r
    finite_ref = torch.isfinite(r)
    both_nonfinite_equal = ~finite_ref & (o == r)
    diff = torch.where(both_nonfinite_equal, torch.zeros_like(diff), diff)
    absdiff = diff.abs().nan_to_num(nan=float("inf"))
    nonfinite = int((~torch.isfinite(o) & finite_ref).sum())
    over = absdiff > atol + rtol * r.abs().nan_to_num(posinf=0.0)
    over &= ~both_nonfinite_equal
    count = int(over.sum())
    first = tuple(int(i) for i in over.nonzero()[0]) if count else None
    finite = torch.isfinite(absdiff)
    fin_diff = diff[finite]
    mean_ref = float(r[finite_ref].abs().mean()) if bool(finite_ref.any()) else 0.0
    return ErrorStats(
        max_abs_err=float(absdiff.max()) if absdiff.numel() else 0.0,
        max_rel_err=float((absdiff / r.abs().clamp_min(max(atol, 1e-12))).max())
        if absdiff.numel() else 0.0,
        mean_abs_err=float(fin_diff.abs().mean()) if fin_diff.numel() else 0.0,
        bias=float(fin_diff.mean()) / mean_ref if fin_diff.numel() and mean_ref > 0 else 0.0,
        mismatch_share=count / max(1, over.numel()),
        mismatches=count,
        elements=over.numel(),
        first_mismatch=first,
        nonfinite=nonfinite,
    )


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
    if len(outs) == 1:
        return error_stats(outs[0], refs[0], atol, rtol)
    cat_o = torch.cat([o.detach().reshape(-1).double() for o in outs])
    cat_r = torch.cat([r.detach().reshape(-1).double() for r in refs])
    return error_stats(cat_o, cat_r, atol, rtol)


def shape_verdict(stats: ErrorStats, max_bias: float) -> str | None:
    """None when the shape passes, else wrong_result or bias."""
    if stats.mismatches or stats.nonfinite:
        return "wrong_result"
    if abs(stats.bias) > max_bias:
        return "bias"
    return None


def describe_failure(kind: str, label: str, stats: ErrorStats, max_bias: float) -> str:
    if kind == "bias":
        return (f"({label}): systematic bias {stats.bias:+.2e} of the mean |reference| "
                f"(limit {max_bias:.0e}), although every element is within tolerance")
    where = f", first at index {stats.first_mismatch}" if stats.first_mismatch else ""
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
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


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
