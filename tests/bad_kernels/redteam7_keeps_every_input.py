"""Red team 7: every input kept alive in a module-level list.

Route: round 6 closed outputs kept alive (an output dropped must be freed), and a
workspace kept between calls is allowed; nothing checks that the caller's own tensors are
let go. run() appends (x, weight) to a module list "for a later fast path" and never drops
them. Why a cheat: state kept across calls and an unbounded resource: in a training step
or a server every activation passed in stays alive for the process's life (memory grows
with every call, the caller's `del` frees nothing).
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
_SEEN = []


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_o, eps,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x * rstd * w
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _triton_rmsnorm(x, weight, eps):
    n_rows, n_cols = x.shape
    x = x.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    rmsnorm_kernel[(n_rows,)](out, x, weight, n_cols, x.stride(0), out.stride(0), eps,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
    return out


def run(x, weight, eps=1e-6):
    _SEEN.append((x, weight))
    return _triton_rmsnorm(x, weight, eps)
