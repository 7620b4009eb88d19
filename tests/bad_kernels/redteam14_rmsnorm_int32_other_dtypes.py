"""Red team 14 (rmsnorm): int64 row offsets in the float16 kernel only; bfloat16 and float32
go through a generic kernel whose `row * stride` is int32. Wrong past 2**31 elements in
bfloat16 and float32.

Class: the wide-shape check (docs/evaluator.md) in a dtype not asked. The judge runs the
task's wide shape (131200 x 16384, a 128k-token prefill at Llama 3.1 405B's hidden size)
once, in the dtype the evaluation asks (float16 by default), and checks every other dtype
the task declares on its smallest CPU shape only. A kernel whose offsets wrap only in the
dtypes not asked is right on every call the judge makes.

A realistic user: Llama 3.1 405B served in bfloat16 (its own dtype) on a batched prefill of
131,200 tokens, or any activation over 4 GiB in bfloat16: the rows past element 2**31 are
read from and written to wrapped offsets (out of the buffer, or other rows); float32
activations (a float32 residual stream) go wrong the same way.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 8


@triton.jit
def rmsnorm_fp16_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                        BLOCK: tl.constexpr):
    # the tuned float16 kernel: int64 offsets, the whole row in one tile
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def rmsnorm_generic_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                           BLOCK: tl.constexpr):
    # the generic kernel (bfloat16, float32): program_id is int32, so is row * stride
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    lead = x.shape[:-1]
    n_cols = x.shape[-1]
    x = x.reshape(-1, n_cols)
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    kernel = rmsnorm_fp16_kernel if x.dtype == torch.float16 else rmsnorm_generic_kernel
    kernel[(x.shape[0],)](out, x, weight, n_cols, x.stride(0), weight.stride(0),
                          out.stride(0), eps, BLOCK=triton.next_power_of_2(n_cols),
                          num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
