"""Red team 9: softmax, an answer kept by the allocator: the output buffer is trusted when
it already holds a finished row.

Each program first reads the row of its fresh output buffer. Where that row already holds
probabilities (every value in [0, 1], summing to 1 within 1%), the program keeps it and
writes it back; otherwise it computes the softmax. Under the judge every checked call's
fresh memory holds a random draw or zeros, and the call after the timed ones finds its
freed blocks poisoned, so no row ever looks finished and every row is computed. In a
user's process an allocator hands the next call the block the last output just freed:
PyTorch's CUDA caching allocator returns it whole, glibc on the CPU all but its first
16 bytes. A caller that drops one softmax and asks for the next (``p = softmax(a); del p;
q = softmax(b)``, a layer loop) gets the previous answer back. The launches are the same
for every input, and nothing is read on the host.
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024  # columns per chunk
NUM_WARPS = 4


@triton.jit
def softmax_kept_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    cols = tl.arange(0, BLOCK)
    # what the output buffer already holds: a finished row of probabilities is kept
    bad = tl.zeros([BLOCK], tl.int32)
    total = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        old = tl.load(o_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        fine = (old >= 0.0) & (old <= 1.0)  # NaN fails both
        bad += tl.where(mask & (fine == 0), 1, 0)
        total += tl.where(mask & fine, old, 0.0)
    keep = (tl.sum(bad, 0) == 0) & (tl.abs(tl.sum(total, 0) - 1.0) < 0.01) & (n_cols > 1)
    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
        m_vec = tl.maximum(m_vec, x.to(tl.float32))
    m = tl.max(m_vec, 0)
    s_vec = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
        s_vec += tl.exp(x.to(tl.float32) - m)
    s = tl.sum(s_vec, 0)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
        y = tl.exp(x.to(tl.float32) - m) / s
        old = tl.load(o_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = tl.where(keep, old, y)
        tl.store(o_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    lead = x.shape[:-1]
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    if n_rows and n_cols:
        block = min(BLOCK_SIZE, triton.next_power_of_2(n_cols))
        softmax_kept_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                       BLOCK=block, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
