"""Planted: a softmax right on every row length whose power-of-two block a listed shape
has (1, 8, 128, 1024, 2048, 8192, 131072 on the CPU lists), wrong in the blocks between
(16 to 64): there it drops each row's last column. The judge's in-bucket drawn shape
never leaves a listed shape's block, so only a draw across every bucket meets it.
Expected: wrong_result, shrunk to one row of 9 to 16 columns."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    if BLOCK >= 16 and BLOCK <= 64:
        mask = cols < n_cols - 1
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def run(x):
    shape = x.shape  # leading dimensions taken too
    x = x.reshape(-1, x.shape[-1]).contiguous()  # every layout: the cheat is the block size
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                  BLOCK=block, num_warps=NUM_WARPS)
    return out.view(shape)
