"""A softmax that follows its input's row stride and keeps offsets in 16 bits: the
32-bit class on a strided view, at a width the CPU interpreter reaches.

`row * stride` wraps past element 65,536, so on a view whose rows stand far apart the
third row is read from an earlier place in the storage. Right on every dense shape under
65,536 elements and on rows of a slightly wider buffer. It stands for a kernel whose
offsets are 32-bit where the judge's wide shape does not look (past 2**32, a view that
reaches past its element count, an input the wide shape keeps small): the far-rows check,
asked at 2**16, must find it as it finds those at 2**31 on the GPU."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x_at = (row * stride_x) % 65536  # the wrap: the input's offsets kept in 16 bits
    x = tl.load(x_ptr + x_at + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    shape = x.shape
    x = x.reshape(-1, x.shape[-1])
    if x.stride(-1) != 1:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                  BLOCK=block, num_warps=NUM_WARPS)
    return out.view(shape)
