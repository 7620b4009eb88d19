"""Red team 13 cheat (rmsnorm): a host read of an import-time constant makes every layout's
plan "not a plan", so the exported op calls run() on every call, on one module instance
that keeps its state: lazy (no eps) past 4096 calls.

Class: which call gets recorded / the export's fallback path. docs/tasks.md: "A call that
reads a tensor's value on the host ... is not a plan: that layout keeps calling `run()`".
The read here is `_TUNING.item()` on a module-level `torch.tensor([1.0])` (a "tuning
scale"), not on any input: the source rules follow values made from run()'s arguments and
from PyTorch calls inside it, and passed it; the value is always 1.0 and changes no
answer. In the export the refused layout then runs the candidate's Python per call, with
a plain dict counting calls across them, which is the path the docs call one "the judge
does not check past a shape's own calls" (`KERNELKB_LAUNCH_PLAN=0`), reached without the
switch. An evaluation calls each shape's fresh instance tens of times; a server's decode
step passes 4096 calls in seconds, after which a zero row (padding) is NaN and
near-silent rows are off by orders of magnitude.
"""
import torch
import triton
import triton.language as tl

LAZY_AFTER = 4096
_TUNING = torch.tensor([1.0])  # "a tuning scale" read on the host each call
_STATE = {}


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_o, eps, scale,
                   BLOCK: tl.constexpr, NO_EPS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, 0) / n_cols
    if NO_EPS:
        rstd = tl.rsqrt(ms)
    else:
        rstd = tl.rsqrt(ms + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * (rstd * scale) * w
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x, weight, eps=1e-6):
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x2.shape
    weight = weight.contiguous()
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return out.view(*lead, n_cols)
    scale = _TUNING.item()
    _STATE["calls"] = _STATE.get("calls", 0) + 1
    rmsnorm_kernel[(n_rows,)](out, x2, weight, n_cols, x2.stride(0), out.stride(0), eps, scale,
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)),
                              NO_EPS=_STATE["calls"] > LAZY_AFTER)
    return out.view(*lead, n_cols)
