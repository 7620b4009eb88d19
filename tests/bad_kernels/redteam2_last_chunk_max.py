"""Red team 2, inputs never drawn (a masked suffix): a chunked softmax that takes each
row's max from its LAST 512 columns only (one pass fewer over long rows). softmax is
shift-invariant, so any max that is not far under the true one gives the right answer
(48 is added to it as headroom): the plain draw, 40*randn (the gap between a 512-column
window's max and the row's stays under exp's range plus the headroom), +100 and -1e4
offsets, a masked PREFIX (first half -inf) and a spike in the LAST column all pass. A
row whose last 512 columns are all -inf (right padding under an additive -inf mask, the
most common mask of all) gets max -inf: NaN everywhere; a spike early in a row more than
~136 over the window's max overflows exp. The mirror image of softmax_first_chunk_max.py,
which the masked prefix and the late spike were added for.
Expected: wrong_result (a right-padded -inf mask, or a spike in the first column)."""
import torch
import triton
import triton.language as tl

CHUNK = 512
HEADROOM = tl.constexpr(48.0)  # exp's range left above the window's max (the row's may be higher)


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    live = rows[:, None] < n_rows
    x_row = x_ptr + rows[:, None].to(tl.int64) * stride_x
    o_row = out_ptr + rows[:, None].to(tl.int64) * stride_o
    last = tl.maximum(n_cols - BLOCK, 0)  # the row's last BLOCK columns
    mask = live & (last + cols[None, :] < n_cols)
    xl = tl.load(x_row + last + cols[None, :], mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(xl, 1)[:, None]  # the row max, from the last chunk only
    if n_cols > BLOCK:
        m = m + HEADROOM
    s_vec = tl.zeros([ROWS, BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = live & (start + cols[None, :] < n_cols)
        x = tl.load(x_row + start + cols[None, :], mask=mask, other=-float("inf"))
        s_vec += tl.exp(x.to(tl.float32) - m)
    s = tl.sum(s_vec, 1)[:, None]
    for start in range(0, n_cols, BLOCK):
        mask = live & (start + cols[None, :] < n_cols)
        x = tl.load(x_row + start + cols[None, :], mask=mask, other=-float("inf"))
        y = tl.exp(x.to(tl.float32) - m) / s
        tl.store(o_row + start + cols[None, :], y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    block = min(CHUNK, triton.next_power_of_2(n_cols))
    rows = max(1, min(64, 4096 // block, triton.next_power_of_2(n_rows)))
    softmax_kernel[(triton.cdiv(n_rows, rows),)](out, x, n_rows, n_cols, x.stride(0),
                                                 out.stride(0), ROWS=rows, BLOCK=block)
    return out
