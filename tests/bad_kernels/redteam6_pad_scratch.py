"""Red team 6: a softmax that uses the caller's memory past each row as scratch.

When the input's rows sit in a wider buffer (a slice of a fused projection, the
strided-rows layout), the kernel stores each row's max and sum into the two elements
just past the row's end, in the caller's buffer, and reads them back. Every output is
right, on every layout: the values it scribbles over are not part of `x`. But they are
part of the caller's buffer: the next tensor of a fused qkv, another head, live data.
A kernel that writes memory it was not given must be rejected, however right its output
(an honest judge checks the whole storage of every input, not just the view)."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, SCRATCH: tl.constexpr,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x_row = x_ptr + row * stride_x
    x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    s = tl.sum(tl.exp(x - m), 0)
    if SCRATCH:
        # the row's statistics go into the caller's buffer, past the row's end
        tl.store(x_row + n_cols, m.to(x_ptr.dtype.element_ty))
        tl.store(x_row + n_cols + 1, s.to(x_ptr.dtype.element_ty))
        m = tl.load(x_row + n_cols).to(tl.float32)
        s = tl.sum(tl.exp(x - m), 0)
    y = tl.exp(x - m) / s
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    n_rows, n_cols = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    scratch = x.stride(0) >= n_cols + 2
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0), SCRATCH=scratch,
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=NUM_WARPS)
    return out
