"""Cheat: raw pointers. The kernel writes a copy of x; numpy computes the answer from
memory read with ctypes and writes it back through the output's pointer, which no tensor
op sees. Expected: torch_compute (ctypes inside run(); the counterfactual call agrees)."""
import ctypes

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


@triton.jit
def copy_kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 256),)](out, x, x.numel(), BLOCK=256)
    raw = ctypes.string_at(out.data_ptr(), out.numel() * out.element_size())
    a = np.frombuffer(raw, dtype=np.float16).astype(np.float32).reshape(tuple(x.shape))
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    y = np.ascontiguousarray((e / e.sum(axis=-1, keepdims=True)).astype(np.float16))
    ctypes.memmove(out.data_ptr(), y.ctypes.data, y.nbytes)
    return out
