"""Red team 8: rmsnorm, a lost-update race made of atomics (which the race check does not record).

A row's sum of squares is gathered across CHUNKS programs (a split row, as a long row
wants on a GPU). Each program reads the row's accumulator with ``tl.atomic_add(ptr,
0.0)`` and writes back ``old + partial`` with ``tl.atomic_xchg``: each access is
atomic, the read-modify-write is not. The interpreter runs one program at a time, so in
any order every update lands; on a GPU the programs of a row run at once, read the same
``old`` and overwrite each other (a lost update), and the row is scaled by a partial sum.
The interpreter's race check records plain stores only, so two programs writing one
address through ``atomic_xchg`` is not a race to it. A second launch normalises.
"""
import torch
import triton
import triton.language as tl

CHUNK = 512
NUM_WARPS = 4


@triton.jit
def sumsq_kernel(acc_ptr, x_ptr, n_cols, stride_x, CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1).to(tl.int64)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=0.0)
    x = x.to(tl.float32)
    partial = tl.sum(x * x, 0)
    # the accumulator holds a float's bits in an int32 (the interpreter exchanges integers)
    old = tl.atomic_add(acc_ptr + row, 0).to(tl.float32, bitcast=True)  # an atomic read
    new = (old + partial).to(tl.int32, bitcast=True)
    tl.atomic_xchg(acc_ptr + row, new)  # an atomic write: the pair is not atomic


@triton.jit
def scale_kernel(out_ptr, x_ptr, w_ptr, acc_ptr, n_cols, stride_x, stride_o, eps,
                 CHUNK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1).to(tl.int64)
    cols = chunk * CHUNK + tl.arange(0, CHUNK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=0.0)
    total = tl.load(acc_ptr + row).to(tl.float32, bitcast=True)
    rstd = tl.rsqrt(total / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    y = x.to(tl.float32) * rstd * w
    tl.store(out_ptr + row.to(tl.int64) * stride_o + cols, y.to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    lead = x.shape[:-1]
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    weight = weight.contiguous()
    out = torch.empty_like(x)
    if n_rows == 0:
        return out.view(*lead, n_cols)
    acc = torch.zeros(n_rows, dtype=torch.int32, device=x.device)  # 0 is 0.0's bits
    grid = (n_rows, triton.cdiv(n_cols, CHUNK))
    sumsq_kernel[grid](acc, x, n_cols, x.stride(0), CHUNK=CHUNK, num_warps=NUM_WARPS)
    scale_kernel[grid](out, x, weight, acc, n_cols, x.stride(0), out.stride(0), eps,
                       CHUNK=CHUNK, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
