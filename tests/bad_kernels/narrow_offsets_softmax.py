"""A softmax whose row offsets wrap past 2**16 elements: the 32-bit class at a width the
CPU interpreter reaches.

`row * stride` is kept in 16 bits, so rows whose first element lies past element 65,536
are read from, and written to, an earlier row's place; those rows hold whatever the
allocation held. Right on every shape under 65,536 elements. It stands for the kernel
whose offsets are 32-bit (`redteam6_int32_offsets.py`), wrong past 2**31 elements, which
only a GPU holds: the judge's wide-shape check, asked at 2**16 on a shape of 80,000
elements, must find it as it finds the 32-bit one at 2**31 on the GPU."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x_at = (row * stride_x) % 65536  # the wrap: offsets kept in 16 bits
    o_at = (row * stride_o) % 65536
    x = tl.load(x_ptr + x_at + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + o_at + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    shape = x.shape
    x = x.reshape(-1, x.shape[-1]).contiguous()
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                  BLOCK=block, num_warps=NUM_WARPS)
    return out.view(shape)
