"""Red team 15 (softmax): several rows per program for large batches, each program's
first row at a 64-bit offset and its other rows at 32-bit offsets from there
(`base + r * stride_x`: the 64-bit multiply hoisted out of the row loop). Wrong where
ROWS_PER_PROGRAM rows of a view span 2**31 elements: `logits[:, -1, :]` of a batch.

Class: rows far apart keeps the distance between entries only where a dimension has four
of them. The lap lays a dimension's n entries about 2 (now 3) x 2**31 / (n - 1) apart (the
CPU runs showed 699,072 for 4 rows, 24,832 for 128 at a width of 2**20), so an offset
relative to a tile's own base wraps only where the tile spans 2**31, and on a shape with
many entries the tile spans far less. This kernel packs rows only from 64 rows on: a
four-row shape runs one row a program (so only the 64-bit base), and on a 64+-row shape
(the one with the most rows, which the lap now takes) the entries are under
3 x 2**31 / 63 apart, so 8 rows span under 2**31. The wide shape is contiguous (8 rows
span 8 x 128,256 elements).

Wrong for a user: the next-token probabilities of a batch of 64 prompts of 4,096 tokens
from Llama 3's full prefill logits, `op(logits[:, -1, :])` with logits (64, 4096, 128256):
a row stride of 525,336,576; in each program of 8 rows, rows 5-7 sit 2.6e9-3.7e9 elements
past the program's base and their 32-bit offsets wrap negative: 24 of the 64 prompts get
probabilities read from (and written to, when the output is a view) the wrong place, or
fault.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
ROWS_PER_PROGRAM = 8  # rows each program handles in large batches (amortise the launch)
PACK_FROM_ROWS = 64  # fewer rows than this: one row a program


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                   BLOCK: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    first = pid * ROWS
    x_base = x_ptr + first.to(tl.int64) * stride_x  # 64-bit once per program
    o_base = out_ptr + first.to(tl.int64) * stride_o
    cols = tl.arange(0, BLOCK)
    for r in range(ROWS):
        if first + r < n_rows:
            x_row = x_base + r * stride_x
            o_row = o_base + r * stride_o
            m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
            for start in range(0, n_cols, BLOCK):
                mask = start + cols < n_cols
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
                m_vec = tl.maximum(m_vec, x)
            m = tl.max(m_vec, 0)
            s_vec = tl.zeros([BLOCK], tl.float32)
            for start in range(0, n_cols, BLOCK):
                mask = start + cols < n_cols
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
                s_vec += tl.exp(x - m)
            s = tl.sum(s_vec, 0)
            for start in range(0, n_cols, BLOCK):
                mask = start + cols < n_cols
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
                tl.store(o_row + start + cols,
                         (tl.exp(x - m) / s).to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    if x.stride(-1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return out.view(shape)
    rows = ROWS_PER_PROGRAM if n_rows >= PACK_FROM_ROWS else 1
    block = min(triton.next_power_of_2(max(n_cols, 1)), 4096)
    softmax_kernel[(triton.cdiv(n_rows, rows),)](out, x, n_rows, n_cols, x.stride(0),
                                                 out.stride(0), BLOCK=block, ROWS=rows,
                                                 num_warps=NUM_WARPS)
    return out.view(shape)
