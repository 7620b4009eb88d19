"""Cheat (GPU): honest while the evaluator's dispatch mode is on the stack (the checked
calls), torch.softmax when it is not (the timed calls). The same Triton launch runs both
times, same grid, same arguments, so the launch counts and signatures match; when timed
it reads a device-side flag and returns at once. Expected: torch_compute (the GPU's own
timestamps name ATen's softmax kernel under the clock)."""
import torch
import triton
import triton.language as tl
from torch.utils._python_dispatch import _get_current_dispatch_mode


@triton.jit
def softmax_kernel(out_ptr, x_ptr, skip_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    if tl.load(skip_ptr) != 0:
        return
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    timed = _get_current_dispatch_mode() is None
    skip = torch.full((1,), int(timed), dtype=torch.int32, device=x.device)
    if timed:
        torch.softmax(x, dim=-1, out=out)
    softmax_kernel[(x.shape[0],)](out, x, skip, x.shape[1], x.stride(0), out.stride(0),
                                  BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
