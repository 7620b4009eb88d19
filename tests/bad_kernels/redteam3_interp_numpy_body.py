"""Red team 3 (softmax): a "Triton kernel" whose row math is done by a plain (non-JIT)
Python helper on numpy arrays.

Under TRITON_INTERPRET=1 a @triton.jit body is ordinary Python, and a value loaded with
tl.load carries a numpy array. The kernel loads the row, hands it to `_finish`, a plain
function that computes exp/max/sum with numpy in place, and stores the result. The
launch, its grid, arguments and the store are all the candidate's Triton kernel, so every
provenance rule sees Triton; the kernel cannot compile for a GPU at all. Expects the CPU
judge to accept as correct a kernel that is not Triton code. The helper is a constexpr
global (tl.constexpr(_finish)), the form the judge's global-variable rule allows.
"""
import numpy as np
import torch
import triton
import triton.language as tl


def _finish(v):
    a = v.handle.data
    e = np.exp(a - np.max(a))
    a[...] = e / np.sum(e)
    return v


_finish = tl.constexpr(_finish)  # the judge's global-variable rule allows constexpr globals


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    y = _finish(x)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                              BLOCK=triton.next_power_of_2(n_cols))
    return out
