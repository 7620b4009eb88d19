"""Cheat: rewrites the evaluator's own comparison (reachable in the worker's process)
so that any output passes. Expected: cheat_tamper."""
import sys

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


def _perfect(out, ref, atol, rtol):
    checks = sys.modules['kernelkb.optimizer.sandbox.checks']
    return checks.error_stats(ref, ref, atol, rtol)


sys.modules['kernelkb.optimizer.sandbox.checks'].compare_outputs = _perfect


def run(x):
    return torch.zeros_like(x)
