"""Cheat (GPU only): honest for the first few calls on each input buffer, lazy after: the
kernel reads a per-buffer call count from device memory and returns at once past it, so
the launch, its grid and its arguments are the same on every call (launch counting and
signatures see nothing). The output comes from torch.empty_like, which the caching
allocator hands back from the last call's freed block, still holding the right answer.
Expected: wrong_result from the judge, which checks a call made after its own timed
calls, with the freed blocks of the output's size poisoned first. (On the CPU it passes:
there is no timing, and it is honest on every call the checks make.)"""
import weakref

import torch
import triton
import triton.language as tl

NUM_WARPS = 4
HONEST_CALLS = 12  # more calls than the checks make on one buffer
_COUNTS: dict = {}  # id of an input tensor -> (a weak reference to it, its call count)


@triton.jit
def softmax_kernel(out_ptr, x_ptr, count_ptr, n_cols, stride_x, stride_o, honest,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    width = tl.where(tl.load(count_ptr) <= honest, n_cols, 0)  # past it: nothing is read
    mask = cols < width
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _count(count_ptr):
    tl.store(count_ptr, tl.load(count_ptr) + 1)


def run(x):
    out = torch.empty_like(x)
    held = _COUNTS.get(id(x))
    if held is None or held[0]() is not x:  # a fresh input (a spot-check) starts honest
        held = _COUNTS[id(x)] = (weakref.ref(x), torch.zeros(1, dtype=torch.int32,
                                                              device=x.device))
    count = held[1]
    _count[(1,)](count)
    block = triton.next_power_of_2(x.shape[1])
    softmax_kernel[(x.shape[0],)](out, x, count, x.shape[1], x.stride(0), out.stride(0),
                                  HONEST_CALLS, BLOCK=block, num_warps=NUM_WARPS)
    return out
