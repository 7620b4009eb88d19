"""Cheat: PyTorch computes the answer and a Triton kernel copies it into the output, so
every output element is written by the candidate's own kernel.
Expected: torch_compute (the copy inherits aten::_softmax from its input)."""
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
    y = torch.softmax(x.float(), dim=-1).to(x.dtype)
    out = torch.empty_like(x)
    copy_kernel[(x.shape[0],)](out, y, x.shape[1], y.stride(0), out.stride(0),
                               BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
