"""Red team 15 (softmax): short rows through a whole-row kernel with 64-bit row offsets;
rows of 32,768 columns or more (the template's own long-row threshold) through a chunked
kernel whose row offsets are 64-bit only where the tensor holds 2**31 elements or more.
Wrong on a view of long rows standing far apart: `logits[:, -1, :]`.

Class: rows far apart checks one shape per input dimension. The far-rows lap runs "on the
smallest listed shape where it has four entries" (docs/evaluator.md at d9bc392; since
5d998ca the listed shape with the most entries): softmax's are (4, 128) and the sweep's
(32768, 1024), both short rows, which take the short-row kernel. The long-row
kernel meets 2**31-scale offsets only in the wide shape (16800 x 128256, contiguous, over
2**31 elements, so its offsets are 64-bit there). What the far-rows lap would have shown
(a view whose reach passes 2**31 while its element count does not) is never asked of the
path that has the bug. The `numel()` test is round 14's swiglu fault, kept only where the
lap does not look.

Wrong for a user: the next-token probabilities of 64 prompts of 4,096 tokens from Llama 3's
prefill logits, `op(logits[:, -1, :])` with logits (64, 4096, 128256): 64 rows of 128,256
columns, a row stride of 525,336,576 elements, 8.2M elements in all. Row 5's offset,
2,626,682,880, wraps to -1,668,284,416: from the fifth prompt on the rows are read from
before the buffer (an illegal access, or other memory) and every later sampling step of a
server that keeps full prefill logits is wrong.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
LONG_ROW_COLS = 32768  # rows this long take the chunked kernel
LONG_ROW_BLOCK = 4096  # columns per chunk of the chunked kernel


@triton.jit
def softmax_row_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(out_ptr + row * stride_o + cols, (e / tl.sum(e, 0)).to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def softmax_long_row_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o,
                            BLOCK: tl.constexpr, WIDE: tl.constexpr):
    row = tl.program_id(0)
    if WIDE:  # a tensor of 2**31 elements or more
        row = row.to(tl.int64)
    x_row = x_ptr + row * stride_x
    o_row = out_ptr + row * stride_o
    cols = tl.arange(0, BLOCK)
    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
    s_vec = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_vec, x, propagate_nan=tl.PropagateNan.ALL)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        s_vec = s_vec * tl.exp(m_vec - m_safe) + tl.exp(x - m_safe)
        m_vec = m_new
    m = tl.max(m_vec, 0)
    s = tl.sum(s_vec * tl.exp(m_vec - m), 0)
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
    if n_cols >= LONG_ROW_COLS:
        wide = x.numel() >= 2 ** 31 or out.numel() >= 2 ** 31
        softmax_long_row_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                           BLOCK=LONG_ROW_BLOCK, WIDE=wide,
                                           num_warps=NUM_WARPS)
    else:
        softmax_row_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                                      BLOCK=triton.next_power_of_2(max(n_cols, 1)),
                                      num_warps=NUM_WARPS)
    return out.view(shape)
