"""Red team 14 (rmsnorm): int64 row offsets for 2-D inputs, int32 ones for the
(batch, seq, hidden) form models pass. Wrong past 2**31 elements when called 3-D.

Class: the wide-shape check (docs/evaluator.md) in a form not asked. The judge runs the
task's wide shape (131200 x 16384, a 128k-token prefill at Llama 3.1 405B's hidden size)
once, as the 2-D tensor the task's shape names; the leading-dimension forms (`(2, rows / 2,
hidden)`, two more leading dimensions, dimensions that do not fold) are called on the
smallest shape asked. This wrapper reads a 3-D input in place through its batch and
sequence strides (no reshape, so a non-contiguous (batch, seq) view is not copied) on a
(seq, batch) grid, with `pid_b * stride_b + pid_s * stride_s` in int32; 2-D inputs take a
kernel with int64 offsets.

A realistic user: any Hugging Face decoder layer calls its RMSNorm on hidden states of shape
(batch, seq, hidden). Llama 3.1 405B prefilling 131,200 tokens as (1, 131200, 16384), or
(8, 16400, 16384): the tokens whose offset passes 2**31 read and write wrapped offsets.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 8


@triton.jit
def _normalize(x_ptrs, w_ptr, o_ptrs, cols, n_cols, stride_w, eps):
    mask = cols < n_cols
    x = tl.load(x_ptrs, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    w = tl.load(w_ptr + cols * stride_w, mask=mask, other=0.0).to(tl.float32)
    tl.store(o_ptrs, (x * rstd * w).to(o_ptrs.dtype.element_ty), mask=mask)


@triton.jit
def rmsnorm_rows_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_x, stride_w, stride_o, eps,
                        BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    _normalize(x_ptr + row * stride_x + cols, w_ptr, out_ptr + row * stride_o + cols, cols,
               n_cols, stride_w, eps)


@triton.jit
def rmsnorm_bsh_kernel(out_ptr, x_ptr, w_ptr, n_cols, stride_xb, stride_xs, stride_ob,
                       stride_os, stride_w, eps, BLOCK: tl.constexpr):
    s = tl.program_id(0)
    b = tl.program_id(1)
    cols = tl.arange(0, BLOCK)
    x_at = b * stride_xb + s * stride_xs  # int32
    o_at = b * stride_ob + s * stride_os
    _normalize(x_ptr + x_at + cols, w_ptr, out_ptr + o_at + cols, cols, n_cols, stride_w, eps)


def run(x, weight, eps=1e-6):
    n_cols = x.shape[-1]
    block = triton.next_power_of_2(n_cols)
    if x.dim() == 3 and x.shape[0] < 65536:
        if x.stride(-1) != 1:
            x = x.contiguous()
        n_b, n_s = x.shape[0], x.shape[1]
        out = torch.empty((n_b, n_s, n_cols), dtype=x.dtype, device=x.device)
        rmsnorm_bsh_kernel[(n_s, n_b)](out, x, weight, n_cols, x.stride(0), x.stride(1),
                                       out.stride(0), out.stride(1), weight.stride(0), eps,
                                       BLOCK=block, num_warps=NUM_WARPS)
        return out
    lead = x.shape[:-1]
    x = x.reshape(-1, n_cols)
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    rmsnorm_rows_kernel[(x.shape[0],)](out, x, weight, n_cols, x.stride(0), weight.stride(0),
                                       out.stride(0), eps, BLOCK=block, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
