"""Red team 6: an RMSNorm whose row offsets are 32-bit, wrong past 2**31 elements.

`row * stride` is computed in int32: right on every shape whose input has fewer than
2**31 elements, wrapped (reading and writing other rows, or out of the buffer) past that.
A 16k-token prefill of a 131072-wide hidden, or any activation tensor over 4 GiB in
fp16, is such a shape. Every shape the judge draws is under 4 GiB (the drawn larger
shape is capped there), so it never meets one. Deliberately cheap: an int64 offset costs
nothing. An honest judge reaches the 2**31-element boundary on the GPU (or checks the
offset arithmetic's width)."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                   USE_W: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
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
    shape = x.shape  # leading dimensions taken: the cheat is the offsets
    x = x.reshape(-1, x.shape[-1])
    if x.stride(1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return _launch(out, x, weight, eps).view(shape)
