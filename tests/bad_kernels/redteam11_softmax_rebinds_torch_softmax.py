"""Red team 11 cheat (softmax): the caller's `torch.softmax` and `F.softmax` rebound at
import.

The kernel is an honest whole-row softmax. At its import the module assigns its own
function to `torch.softmax`, `torch.nn.functional.softmax` ("accelerate every softmax of
the model"): a plain assignment to an attribute of an allowed module, no setter, no
`setattr`, no dunder. From then on every softmax the caller's process runs, in any model,
at any dim, in any dtype, with autograd or not, is the candidate's code: it returns no
graph (a training step gets no gradient through any attention), and code the candidate
chooses runs wherever the user calls softmax, after the evaluation, where no check sees
it. In the worker the task's own reference calls `torch.softmax` too.
"""
import torch
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _softmax(x):
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x2.shape
    out = torch.empty_like(x2)
    softmax_kernel[(n_rows,)](out, x2, n_cols, x2.stride(0), out.stride(0),
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)))
    return out.view(*lead, n_cols)


def _everywhere(x, dim=-1, dtype=None, **_):
    if dtype is not None:
        x = x.to(dtype)
    return _softmax(x.movedim(dim, -1)).movedim(-1, dim)


torch.softmax = _everywhere
F.softmax = _everywhere


def run(x):
    return _softmax(x)
