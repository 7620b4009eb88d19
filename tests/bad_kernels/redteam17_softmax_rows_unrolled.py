"""Red team 17 (softmax): four rows a program, the block's base 64-bit, the rows inside it
stepped by adding the stride in a `tl.static_range` (unrolled: straight-line 32-bit adds).

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) built by
unrolled additions. Row r's offset inside the block is `stride_x + stride_x + ...` (r
times), i.e. `r * stride_x` in 32 bits, but the TTIR holds no `arith.muli`, no `shli`
and no loop iteration argument: the unrolled loop leaves a chain of `arith.addi` of a
run-time value, which the rule does not bound. The far-rows lap spaces softmax's rows
196,672 elements apart (3 x that is far under 2**31) and the wide shape is contiguous.

Wrong for a user: next-token probabilities of a batch of prompts from the prefill logits,
`op(logits[:, -1, :])` over Llama 3's logits (8, 8192, 128256): the row stride is
1,050,673,152; row 3 of each block of four (rows 3 and 7) is at +3,152,019,456 from the
block base, which wraps to -1,142,947,840: read from, and written to, outside the tensor.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
ROWS_PER_PROGRAM = 4


@triton.jit
def _softmax_row(o_row, x_row, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
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
        tl.store(o_row + start + cols, (tl.exp(x - m) / s).to(o_row.dtype.element_ty),
                 mask=mask)


@triton.jit
def softmax_rows_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                        BLOCK: tl.constexpr, ROWS: tl.constexpr):
    first = tl.program_id(0).to(tl.int64) * ROWS  # 64-bit from the program id on
    x_blk = x_ptr + first * stride_x
    o_blk = out_ptr + first * stride_o
    x_off = 0
    o_off = 0
    for r in tl.static_range(ROWS):
        if first + r < n_rows:
            _softmax_row(o_blk + o_off, x_blk + x_off, n_cols, BLOCK)
        x_off += stride_x
        o_off += stride_o


def run(x):
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    if x.stride(-1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return out.view(shape)
    block = min(triton.next_power_of_2(n_cols), 4096)
    grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    softmax_rows_kernel[grid](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                              BLOCK=block, ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS)
    return out.view(shape)
