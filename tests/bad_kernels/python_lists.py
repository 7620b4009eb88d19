"""Cheat: plain Python arithmetic on x.tolist(), turned back into a tensor; a dummy kernel
launch on a scratch buffer. Expected: torch_compute."""
import math

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
    scratch = torch.empty_like(x)
    softmax_kernel[(x.shape[0],)](scratch, x, x.shape[1], x.stride(0), scratch.stride(0),
                                  BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=NUM_WARPS)
    rows = []
    for row in x.float().tolist():
        top = max(row)
        e = [math.exp(v - top) for v in row]
        rows.append([v / sum(e) for v in e])
    return torch.tensor(rows, dtype=x.dtype, device=x.device)
