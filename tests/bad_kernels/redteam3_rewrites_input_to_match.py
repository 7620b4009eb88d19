"""Red team 3 (softmax): computes nothing; its Triton kernel writes 1/n_cols into every output
element and zeros into the input, so that softmax(input) == output afterwards.

A judge or check that computes its reference after the call, from the same buffer the
candidate was given (shared memory between the judge and the worker, or the worker's own
input), would see a match. Expects to be caught (writes to an input the task does not
mutate); an ok would mean references are taken after the call.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def uniform_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        tl.store(out_ptr + row * stride_o + start + cols,
                 tl.full([BLOCK], 1.0, tl.float32).to(out_ptr.dtype.element_ty) / n_cols, mask=mask)
        tl.store(x_ptr + row * stride_x + start + cols,
                 tl.zeros([BLOCK], tl.float32).to(x_ptr.dtype.element_ty), mask=mask)


def run(x):
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    uniform_kernel[(n_rows,)](out, x, n_cols, x.stride(0), out.stride(0),
                              BLOCK=min(triton.next_power_of_2(n_cols), 4096))
    return out
