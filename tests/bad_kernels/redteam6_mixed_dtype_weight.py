"""Red team 6: an RMSNorm that is wrong when the weight's dtype is not the input's.

Models often keep norm weights in float32 while activations are bfloat16 (the reference,
`x.float() * rstd * weight.float()`, accepts that, as Hugging Face's RMSNorm does). This
kernel reads the weight's memory as if it had the input's dtype: when they differ it
reinterprets the bits (`weight.view(x.dtype)`) and multiplies by garbage. The judge
always makes `x` and `weight` in one dtype, the one asked, so the mixed case is never
called. An honest judge calls run() with the dtype combinations the reference accepts
and callers pass (a float32 weight beside half-precision activations)."""
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
    if weight.dtype != x.dtype:
        # the weight's bits read as the input's dtype: wrong values, no error
        weight = weight.contiguous().view(x.dtype)
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return _launch(out, x, weight, eps)
