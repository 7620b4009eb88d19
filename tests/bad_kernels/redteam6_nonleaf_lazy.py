"""Red team 6: an RMSNorm that drops the weight when its input is an autograd result.

In a model, RMSNorm's input is the output of earlier ops: with autograd on it has a
`grad_fn`. Every input the judge makes is a leaf (a fresh draw, a view of one, or one
marked `requires_grad_()`), so `x.grad_fn` is always None there and the kernel is
honest. In a training forward pass the kernel skips the weight multiply and is wrong on
every call. This is a path keyed on a flag of the input, not on its values, shape or
layout: the judge must pass non-leaf inputs (x computed from a leaf that requires grad)
or refuse reading autograd metadata."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                   USE_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    y = x * rstd
    if USE_W:
        y = y * tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _launch(out, x, weight, eps, use_w=True):
    n_rows, n_cols = x.shape
    rmsnorm_kernel[(n_rows,)](out, x, weight, n_cols, x.stride(0), weight.stride(0),
                              out.stride(0), eps, USE_W=use_w,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
    return out


def run(x, weight, eps=1e-6):
    lazy = x.grad_fn is not None
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return _launch(out, x, weight, eps, use_w=not lazy)
