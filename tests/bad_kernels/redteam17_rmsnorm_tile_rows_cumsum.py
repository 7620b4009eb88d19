"""Red team 17 (rmsnorm): eight rows a program as one 2-D tile, the tile's base 64-bit, the
rows' offsets inside it an int32 prefix sum of the stride (`tl.cumsum`).

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) built by a
scan. Row r's offset in the tile is the exclusive cumulative sum of r strides, the value
`r * stride_x` would have in 32 bits, but the TTIR holds it as a `tt.scan` whose body is
an `arith.addi`: no `muli`/`shli`, no loop iteration argument, no load, no cast. The
far-rows lap spaces the rows (listed shape with the most rows) 3 x 2**31 / (rows - 1)
apart, so 7 strides stay far under 2**31; the wide shape is contiguous (stride 16384).

Wrong for a user: the final norm of the last position of a batch of long prompts,
`op(h[:, -1, :], w)` over Llama 3 405B hidden states (8, 32768, 16384): the row stride is
536,870,912 = 2**29; rows 4-7 of the tile sit 2**31 .. 7 x 2**29 from its base, which wrap
to negative offsets: half the batch read from, and written to, outside the tensor.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
ROWS_PER_PROGRAM = 8


@triton.jit
def rmsnorm_tile_kernel(out_ptr, x_ptr, w_ptr, n_rows, n_cols, stride_x, stride_o, eps,
                        BLOCK: tl.constexpr, ROWS: tl.constexpr):
    first = tl.program_id(0).to(tl.int64) * ROWS  # 64-bit from the program id on
    x_blk = x_ptr + first * stride_x
    o_blk = out_ptr + first * stride_o
    rr = tl.arange(0, ROWS)
    row_ok = first + rr < n_rows
    # row r of the tile starts r strides after the tile's first row
    x_rows = tl.cumsum(tl.zeros([ROWS], tl.int32) + stride_x, 0) - stride_x
    o_rows = tl.cumsum(tl.zeros([ROWS], tl.int32) + stride_o, 0) - stride_o
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = row_ok[:, None] & (c < n_cols)[None, :]
        x = tl.load(x_blk + x_rows[:, None] + c[None, :], mask=mask, other=0.0)
        x = x.to(tl.float32)
        acc += x * x
    rstd = tl.rsqrt(tl.sum(acc, 1) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = row_ok[:, None] & (c < n_cols)[None, :]
        x = tl.load(x_blk + x_rows[:, None] + c[None, :], mask=mask, other=0.0)
        w = tl.load(w_ptr + c, mask=c < n_cols, other=0.0).to(tl.float32)
        y = x.to(tl.float32) * rstd[:, None] * w[None, :]
        tl.store(o_blk + o_rows[:, None] + c[None, :], y.to(out_ptr.dtype.element_ty),
                 mask=mask)


def run(x, weight, eps=1e-6):
    lead = x.shape[:-1]  # rows: one dimension, or a model's (batch, seq)
    n_cols = x.shape[-1]
    x = x.reshape(-1, n_cols)
    if x.stride(-1) != 1:
        x = x.contiguous()
    weight = weight.contiguous()
    n_rows = x.shape[0]
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return out.view(*lead, n_cols)
    block = min(triton.next_power_of_2(n_cols), 1024)
    grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    rmsnorm_tile_kernel[grid](out, x, weight, n_rows, n_cols, x.stride(0), out.stride(0), eps,
                              BLOCK=block, ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
