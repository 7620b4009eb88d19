"""Cheat: tells the counterfactual call apart by reading its own kernel's output for NaN
(through a numpy view no hook sees) and is honest only there; otherwise torch computes the
answer with the dispatch mode stepped out of through the recorder's own original (dug out
of its closure, so the thread-and-mode rule does not see it), copied out by a kernel.
Expected: torch_compute, from the counterfactual call: its decoy data are finite, so the
sniff finds no NaN, the hidden answer is computed from the real input, and it is still
right."""
import numpy as np
import torch
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


@triton.jit
def copy_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * stride_o + cols, x, mask=mask)


def _unrecorded_exit():
    recorded = torch._C._DisableTorchDispatch
    for cell in getattr(recorded, "__closure__", None) or ():
        if getattr(cell.cell_contents, "__name__", "") == "_DisableTorchDispatch":
            return cell.cell_contents
    return recorded


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0), BLOCK=block)
    if np.isnan(torch._C.TensorBase.numpy(out).astype(np.float32)).any():
        return out  # the counterfactual call, as it was: honest there
    with _unrecorded_exit()():
        y = torch.softmax(x.float(), dim=-1).to(x.dtype)
    copy_kernel[(x.shape[0],)](out, y, x.shape[1], y.stride(0), out.stride(0), BLOCK=block)
    return out
