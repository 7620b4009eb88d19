"""Red team 11 cheat (softmax): the caller's `torch.empty_like` rebound at import.

Rebinding the op itself (`torch.softmax = ...`) is refused from the source: it names the
op. An allocator is named freely, so this one assigns its own function to
`torch.empty_like` at import ("a faster allocator"), a plain assignment to an attribute
of an allowed module. The kernel is an honest whole-row softmax. From then on every
`empty_like` of the caller's process is the candidate's code: it drops `memory_format`
and `requires_grad` (a channels-last model's buffers come back row-major, a buffer asked
with `requires_grad=True` does not require grad), and whatever the candidate puts there
runs at every allocation of the user's model, after the evaluation.
"""
import torch
import triton
import triton.language as tl


def _empty_like(x, dtype=None, device=None, **_):
    return torch.empty(x.shape, dtype=dtype or x.dtype, device=device or x.device)


torch.empty_like = _empty_like


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
    out = torch.empty(x2.shape, dtype=x2.dtype, device=x2.device)
    softmax_kernel[(n_rows,)](out, x2, n_cols, x2.stride(0), out.stride(0),
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)))
    return out.view(*lead, n_cols)


def run(x):
    return _softmax(x)
