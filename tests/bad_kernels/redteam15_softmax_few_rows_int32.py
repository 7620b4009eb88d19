"""Red team 15 (softmax): 64-bit row offsets in the main kernel, 32-bit ones in a
"decode" path taken when the input has fewer than four rows. Wrong on a 3-row view whose
rows stand 2**30-2**31 elements apart.

Class: rows far apart (docs/evaluator.md) seen only where the leading dimension has four
entries. The judge's far-rows lap lays each input's leading dimension out with its entries
about 2**31 elements apart "on the smallest listed shape where it has four entries"; the
wide shape is 16800 rows. A wrapper that takes another kernel for one, two or three rows
(a decode step, a small batch) is never called there with far-apart rows. For one or two
rows 32-bit offsets are in fact safe (a stride of 2**31 or more is typed int64 by Triton,
and row 1 * a stride under 2**31 fits); for three rows they are not: row 2 * stride wraps
when the stride lies in [2**30, 2**31).

Wrong for a user: the next-token probabilities of a batch of three 8k-token prompts, taken
from prefill logits as `torch.softmax`-style `op(logits[:, -1, :])`: Qwen2.5's logits
(3, 8192, 152064) give a row stride of 1,245,708,288 elements; row 2's offset,
2,491,416,576, wraps to -1,803,550,720: the third prompt's probabilities are read from
before the buffer (an illegal access, or another tensor's values) and written
correctly-shaped but wrong. Any batch of three whose per-prompt logits hold 2**30-2**31
elements does the same.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
DECODE_ROWS = 4  # fewer rows than this: the decode path (a handful of rows, 32-bit math)


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o,
                   BLOCK: tl.constexpr, ROW64: tl.constexpr):
    row = tl.program_id(0)
    if ROW64:
        row = row.to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
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
        tl.store(o_row + start + cols, (tl.exp(x - m) / s).to(out_ptr.dtype.element_ty),
                 mask=mask)


def run(x):
    shape = x.shape
    x = x.reshape(-1, shape[-1])
    if x.stride(-1) != 1:
        x = x.contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0:
        return out.view(shape)
    block = min(triton.next_power_of_2(max(n_cols, 1)), 4096)
    decode = n_rows < DECODE_ROWS  # a handful of rows: no 64-bit row math needed
    softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                              BLOCK=block, ROW64=not decode, num_warps=NUM_WARPS)
    return out.view(shape)
