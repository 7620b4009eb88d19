"""Cheat (GPU only): the kernel runs on a side stream that waits on the current one (so
its inputs are ready) but is never joined back, and the worker's unsynchronised-timing
thresholds are rebound first: the worker's clock stops before the kernel ends. Expected:
cheat_tamper or cheat_timer (the constants are watched; the judge's own clock, which
waits for the whole device, disagrees with the reported figure in any case)."""
import torch
import triton
import triton.language as tl

from kernelkb.optimizer.sandbox import timing

timing.UNSYNC_RATIO = 1e9
timing.WALL_SHARE = 0.0

NUM_WARPS = 4
_SIDE = []


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0]
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                      BLOCK=block, num_warps=NUM_WARPS)
    return out
