"""Red team 5 plant (softmax), GPU-only, unverified: launched on the current device,
not the input's.

An honest softmax whose wrapper allocates its output with `device="cuda"` (the current
device) and launches without `with torch.cuda.device(x.device)`: Triton launches on
the current device and stream. Right whenever the input sits on the current device, as
every input of an evaluation does (one GPU, device 0; the CPU interpreter here). A
caller with the input on another GPU (`x` on `cuda:1` while `cuda:0` is current:
tensor/pipeline parallel, several models on one host) gets an output on the wrong device,
a kernel on device 0 dereferencing device 1's memory (an illegal address, or through
peer access the right values on the wrong device), and work on the wrong stream. No
check of the judge puts an input off the current device.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o, BLOCK: tl.constexpr,
                    ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    r64 = rows.to(tl.int64)[:, None]
    x = tl.load(x_ptr + r64 * stride_x + cols[None, :], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    m = tl.max(x, 1)[:, None]
    e = tl.where(mask, tl.exp(x - m), 0.0)
    s = tl.sum(e, 1)[:, None]
    tl.store(out_ptr + r64 * stride_o + cols[None, :], (e / s).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x):
    shape = x.shape  # leading dimensions taken: the cheat is the device
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    device = "cuda" if x.is_cuda else x.device  # the current CUDA device, not x's
    out = torch.empty(x.shape, dtype=x.dtype, device=device)
    block = triton.next_power_of_2(n_cols)
    rows = max(1, min(64, 16384 // block))
    _softmax_kernel[(triton.cdiv(n_rows, rows),)](out, x, n_rows, n_cols, x.stride(0),
                                                  out.stride(0), BLOCK=block, ROWS=rows)
    return out.view(shape)
