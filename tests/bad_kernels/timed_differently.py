"""Cheat (GPU only): behaves when checked, cuts corners when timed. It looks at its caller
(the evaluator's timing loop) and then launches one program instead of one per row.
Expected: cheat_timer (the timed calls launch other work than the checked ones)."""
import inspect

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
    timed = any("bench" in frame.function or "time_shape" in frame.function
                for frame in inspect.stack()[1:12])
    rows = 1 if timed else x.shape[0]
    softmax_kernel[(rows,)](out, x, x.shape[1], x.stride(0), out.stride(0),
                            BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=NUM_WARPS)
    return out
