"""Red team 11 cheat (rmsnorm): PyTorch operators on a tensor laundered through a dict.

Round 10's `rmsnorm_operators_only` computed the norm with operators and Python's `sum`
on x past the judge's reach; the wrapper's allow-list now follows every value made from
run()'s tensors and refuses an operator on one. Here x and the weight are stored into a
fresh dict (`stash["x"] = x`) and read back out of it: the dict was made from nothing,
and what a subscript assignment puts into it is not followed, so `xf * xf`, Python's
`sum` over `xf.t()`, `** -0.5` and the weight's product are operators on values the
reader does not know are tensors. No op is named. The path is taken for float64 x only,
a dtype the task does not declare and the judge never draws (its other dtypes are the
declared ones); float16, bfloat16 and float32 get an honest Triton RMSNorm.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_o, eps,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def _rmsnorm(x, weight, eps):
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x2.shape
    w = weight.contiguous()
    out = torch.empty_like(x2)
    rmsnorm_kernel[(n_rows,)](out, x2, w, n_cols, x2.stride(0), out.stride(0), eps,
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)))
    return out.view(*lead, n_cols)


def _wide_rmsnorm(x, weight, eps):
    stash = {}
    stash["x"] = x.reshape(-1, x.shape[-1])
    stash["w"] = weight
    xf = stash["x"]
    w = stash["w"]
    n = xf.shape[-1]
    ms = sum(c * c for c in xf.t()) / n
    inv = (ms + eps) ** -0.5
    return (xf * inv[:, None] * w).to(x.dtype).view(x.shape)


def run(x, weight, eps=1e-6):
    if x.dtype == torch.float64:
        return _wide_rmsnorm(x, weight, eps)  # "float64 wants the exact sum"
    return _rmsnorm(x, weight, eps)
