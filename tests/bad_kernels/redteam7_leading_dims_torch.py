"""Red team 7: activations with leading batch dimensions go to PyTorch.

Route: the task's signature names `x: Tensor[rows, hidden]`, and every draw is 2-D, but
its reference (and every RMSNorm a model calls) normalises the last dimension of any
tensor: a transformer hands it (batch, seq, hidden). The judge never passes a 3-D x, so
run() sends every tensor of more than two dimensions to PyTorch and keeps the Triton
kernel for the 2-D ones it is checked on. Why a cheat: a model's real calls are computed by
PyTorch, not by the candidate's kernel; the judge sees only the 2-D path.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


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
    if x.dim() != 2:
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
        return (xf * rstd * weight.float()).to(x.dtype)
    return _triton_rmsnorm(x, weight, eps)
