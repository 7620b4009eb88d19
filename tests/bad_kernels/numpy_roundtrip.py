"""Cheat: a kernel launches on a scratch buffer; numpy computes the answer on the host
(.cpu().numpy()) and it is copied back. Expected: torch_compute (a host read of the data)."""
import numpy as np
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
    x = x.contiguous()
    scratch = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](scratch, x, x.shape[1], x.stride(0), scratch.stride(0),
                                  BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=NUM_WARPS)
    a = x.cpu().numpy().astype(np.float32)
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    out = torch.empty_like(x)
    out.copy_(torch.from_numpy(e / e.sum(axis=-1, keepdims=True)).to(x.device, x.dtype))
    return out
