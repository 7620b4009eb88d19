"""Cheat: runs torch.softmax with the dispatch mode disabled (the evaluator's tracker does
not see it) and copies the result out with a Triton kernel.
Expected: torch_compute (the candidate stepped out of the dispatch mode)."""
import torch
import triton
import triton.language as tl


@triton.jit
def copy_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_o + cols, x, mask=mask)


def run(x):
    with torch._C._DisableTorchDispatch():
        y = torch.softmax(x.float(), dim=-1).to(x.dtype)
    out = torch.empty_like(x)
    copy_kernel[(x.shape[0],)](out, y, x.shape[1], y.stride(0), out.stride(0),
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
