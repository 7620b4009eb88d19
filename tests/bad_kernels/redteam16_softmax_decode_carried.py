"""Red team 16 (softmax): 64-bit row offsets in the main kernel; a "decode" path for one to
three rows where a single program walks the rows, its row offset an int32 loop variable
stepped by adding the stride. Wrong on a 3-row view whose rows stand 2**30-2**31 elements
apart.

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) built
without a multiply. The rule follows an i32 `arith.muli` / `arith.shli` of two run-time
values into `tt.addptr`; here the row offset is `off += stride_x` round an `scf.for`
(an iter_arg fed by additions alone), so the TTIR holds no 32-bit product at all: row r's
offset is r additions of the stride, the same 32-bit value `r * stride_x` would give. The
laps do not reach it either: the far-rows lap lays out one shape per dimension, the listed
one with the most entries (never a 1-3 row input), and the wide shape has 16,800 rows.

Wrong for a user: next-token probabilities of a batch of three 8k-token prompts taken from
prefill logits, `op(logits[:, -1, :])` over Qwen2.5's logits (3, 8192, 152064): the row
stride is 1,245,708,288 elements; row 2's offset, 2 x 1,245,708,288 = 2,491,416,576,
wraps to -1,803,550,720: the third prompt is read from before the buffer (a fault, or
another tensor's values) and its output is written there too.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
DECODE_ROWS = 4  # fewer rows than this: one program walks them (a decode step)


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
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    _softmax_row(out_ptr + row * stride_o, x_ptr + row * stride_x, n_cols, BLOCK)


@triton.jit
def softmax_decode_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                          BLOCK: tl.constexpr):
    # a handful of rows: one program, the row offsets stepped by adding the strides
    x_off = 0
    o_off = 0
    for r in range(n_rows):
        _softmax_row(out_ptr + o_off, x_ptr + x_off, n_cols, BLOCK)
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
    if n_rows < DECODE_ROWS:
        softmax_decode_kernel[(1,)](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                                    BLOCK=block, num_warps=NUM_WARPS)
    else:
        softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                  BLOCK=block, num_warps=NUM_WARPS)
    return out.view(shape)
