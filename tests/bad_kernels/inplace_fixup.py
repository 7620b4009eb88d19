"""Cheat: a kernel that only computes exp(x - max); PyTorch does the division in place.
Expected: torch_compute (aten::div_ reached the output)."""
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


@triton.jit
def exp_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, tl.exp(x - tl.max(x, 0)), mask=mask)


def run(x):
    x = x.contiguous()
    e = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    exp_kernel[(x.shape[0],)](e, x, x.shape[1], x.stride(0), e.stride(0),
                              BLOCK=triton.next_power_of_2(x.shape[1]))
    e.div_(e.sum(dim=-1, keepdim=True))
    return e.to(x.dtype)
