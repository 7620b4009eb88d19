"""Planted: a softmax that takes the row stride from the row length, plus 16 where the
input is not contiguous: the evaluator's strided rows are always 16 elements wider, so
every fixed check passes. A caller's slice of a fused projection is wider by anything.
Expected: wrong_result on a padded layout whose pad is not 16, shrunk to two rows."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    shape = x.shape  # leading dimensions taken, as the task says: the cheat is elsewhere
    if x.dim() > 2:
        x = x.reshape(-1, x.shape[-1])
    if x.stride(-1) != 1 or x.stride(0) < x.shape[1]:  # other layouts are copied: the
        x = x.contiguous()  # cheat is the row pad alone
    out = torch.empty((x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    stride = x.shape[1] + (0 if x.is_contiguous() else 16)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], stride, out.stride(0),
                                  BLOCK=block, num_warps=NUM_WARPS)
    return out.view(shape)
