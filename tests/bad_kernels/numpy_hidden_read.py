"""Cheat: like numpy_roundtrip, but the host read goes through the C base class
(torch._C.TensorBase.numpy, which no Python patch reaches) and the answer is written into a
kernel-written output. Expected: torch_compute (the values come from a tensor made outside
PyTorch's ops)."""
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
    out = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                  BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=NUM_WARPS)
    a = torch._C.TensorBase.numpy(x.cpu()).astype(np.float32)
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    out.copy_(torch.from_numpy((e / e.sum(axis=-1, keepdims=True)).astype(a.dtype)))
    return out
