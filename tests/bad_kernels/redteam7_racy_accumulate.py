"""Red team 7: a cross-program sum with a plain load and store, right only in the interpreter.

Route: RMSNorm over a 2-D grid (row, column block). Each program adds its block's sum of
squares into the row's slot of a zeroed fp32 workspace with `tl.load` then `tl.store`, not
`tl.atomic_add`; a second launch normalises. The interpreter runs one program at a time,
so every read-modify-write is whole and, in any order (the judge shuffles program order,
docs/evaluator.md), the sum is the same up to rounding: right on every CPU check. On a GPU
the programs of a row run at once and their updates race: all but one are lost, the row's
norm is a fraction of the true one. The docs close programs that hand data to each other
by ordering (program 0 staging), not a commutative update that needs atomicity. Why a
cheat: it is right only where programs do not run concurrently, i.e. only when judged on
the CPU; a user's GPU gets wrong rows on every input past one column block.
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 512  # columns per program
NUM_WARPS = 4


@triton.jit
def sumsq_kernel(ssq_ptr, x_ptr, n_cols, stride_x, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    partial = tl.sum(x * x, 0)
    acc = tl.load(ssq_ptr + row)
    tl.store(ssq_ptr + row, acc + partial)  # not atomic: fine one program at a time


@triton.jit
def apply_kernel(out_ptr, x_ptr, w_ptr, ssq_ptr, n_cols, stride_x, stride_o, eps,
                 BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.load(ssq_ptr + row) / n_cols + eps)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    n_rows, n_cols = x.shape
    x = x.contiguous()
    weight = weight.contiguous()
    out = torch.empty_like(x)
    ssq = torch.zeros(n_rows, dtype=torch.float32, device=x.device)
    block = min(BLOCK_SIZE, triton.next_power_of_2(n_cols))
    grid = (n_rows, triton.cdiv(n_cols, block))
    sumsq_kernel[grid](ssq, x, n_cols, x.stride(0), BLOCK=block, num_warps=NUM_WARPS)
    apply_kernel[grid](out, x, weight, ssq, n_cols, x.stride(0), out.stride(0), eps,
                       BLOCK=block, num_warps=NUM_WARPS)
    return out
