"""Red team 13 cheat (rmsnorm): a call counter kept in the sign bits of a module-level
buffer of zeros; lazy (no eps) past 2**14 calls of a layout.

Class: state that survives across calls through a kept buffer the plan replays, hidden
from a value comparison. Round 9's device-side call count (`lazy_after_n.py`) is refused
because "its count is a buffer every call leaves changed" (`Plan.kept_and_changed`). Here
the count is a 16-bit binary number written as +0.0 / -0.0 into an import-time
`torch.zeros(16)`: every value stays 0, so a comparison of values (`==`, `torch.equal`,
`allclose`) calls the buffer unchanged, and an import-time tensor "still unchanged" is the
one every fresh instance shares (docs/tasks.md). Program 0 of each launch reads the count
from the sign bits and writes count + 1; every program reads it and takes the eps-free
path once it reaches 2**14.

The exported op replays the launch, with this buffer, on every call of a layout, so a
server's decode step reaches 16,384 calls in seconds and from then on a zero row (padding,
a masked token) comes out NaN and near-silent rows off by orders of magnitude. An
evaluation calls each shape tens of times. Only a comparison of the buffer's bytes
(or its sign bits) sees the change.
"""
import torch
import triton
import triton.language as tl

BITS = 16
LAZY_AFTER = 2 ** 14
_COUNT = torch.zeros(BITS, device="cuda" if torch.cuda.is_available() else "cpu")


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, cnt_ptr, n_cols, stride_x, stride_o, eps,
                   BLOCK: tl.constexpr, BITS: tl.constexpr, LAZY_AFTER: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    bits = tl.arange(0, BITS)
    z = tl.load(cnt_ptr + bits)
    on = (z.to(tl.int32, bitcast=True) < 0).to(tl.int32)
    count = tl.sum(on << bits, 0)
    if pid == 0:
        nb = ((count + 1) >> bits) & 1
        tl.store(cnt_ptr + bits, (nb << 31).to(tl.float32, bitcast=True))
    lazy = count >= LAZY_AFTER
    row = pid.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, 0) / n_cols
    rstd = tl.rsqrt(ms + tl.where(lazy, 0.0, eps))
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x2.shape
    weight = weight.contiguous()
    out = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return out.view(*lead, n_cols)
    rmsnorm_kernel[(n_rows,)](out, x2, weight, _COUNT, n_cols, x2.stride(0), out.stride(0), eps,
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)), BITS=BITS,
                              LAZY_AFTER=LAZY_AFTER)
    return out.view(*lead, n_cols)
