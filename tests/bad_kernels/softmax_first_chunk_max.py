"""Cheat by shortcut: a chunked softmax that takes each row's max from its first chunk
only, plus a headroom of 60 (one pass fewer over long rows). softmax is shift-invariant, so on ordinary logits,
and on logits all shifted alike (+100, -1e4), any max gives the right answer; a logit
more than ~148 over the first chunk's max, late in the row, overflows exp in fp32, and a
first chunk all -inf (a masked prefix) leaves the max at -inf: the row turns to inf /
NaN. Rows longer than one chunk only.
Expected: wrong_result (only under a masked prefix).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_rows(out, x, n_cols, s_x, s_o, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    first = tl.load(x + r * s_x + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
    m = tl.max(first, 0) + 60.0  # headroom: large logits later in the row stay finite
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + c
        v = tl.load(x + r * s_x + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        total += tl.exp(v - m)
    denom = tl.sum(total, 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + c
        v = tl.load(x + r * s_x + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(out + r * s_o + cols, (tl.exp(v - m) / denom).to(out.dtype.element_ty),
                 mask=cols < n_cols)


def run(x):
    out = torch.empty_like(x)
    softmax_rows[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0), BLOCK=64)
    return out
