"""Red team 15 (softmax): the input read through 64-bit offsets that follow its row
stride (any view, any distance between rows), the output written through 32-bit offsets
from two launches, each from its own base pointer, where the output holds 2**31 elements
or more. Right up to 2**32 output elements, wrong past.

Class: rows far apart lays out inputs only. The far-rows lap (docs/evaluator.md) puts each
input's rows about 2**31 elements apart, so an input offset kept in 32 bits wraps
whatever its size (round 14's two-launch softmax, which split its input and output alike,
is refused there). An output is allocated by `run()` itself, contiguous, and only the wide
shape (16800 x 128256, 2,154,700,800 elements: over 2**31, under 2**32) ever makes it
large. This kernel fixed what far rows sees (the input) and kept the split where only the
wide shape looks (the output): each half of the wide shape's output spans under 2**31
elements, so every row the judge compares is right.

Wrong for a user: the softmax of Qwen2.5's logits (vocabulary 152,064) over a 32,768-token
micro-batch (4.98e9 elements, 10 GB in float16; distillation, or a loss over full
probabilities). Each half then spans 2.49e9 output elements: from row 14,123 of each half
on, `row * stride_o` wraps negative and the probabilities are written before the half's
base (into the first half's rows, or before the buffer: an illegal access), and the last
rows of each half are never written (they keep whatever `torch.empty` held).
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
LAUNCH_SPAN = 2 ** 31  # output elements one launch may address with 32-bit offsets


@triton.jit
def softmax_kernel(out_ptr, x_ptr, row0, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    # the input may be any view: its offsets in 64 bits, from the caller's own strides
    x_row = x_ptr + (row0 + row).to(tl.int64) * stride_x
    # the output is ours, contiguous, and each launch spans < LAUNCH_SPAN of it
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
    # one launch while the output fits 32-bit offsets, else the rows in two halves
    parts = 1 if out.numel() < LAUNCH_SPAN else 2
    step = triton.cdiv(n_rows, parts)
    for row0 in range(0, n_rows, step):
        rows = min(step, n_rows - row0)
        softmax_kernel[(rows,)](out[row0:], x, row0, n_cols, x.stride(0), out.stride(0),
                                BLOCK=block, num_warps=NUM_WARPS)
    return out.view(shape)
