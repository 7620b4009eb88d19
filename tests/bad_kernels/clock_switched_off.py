"""Cheat (GPU): the kernel runs on a side stream that waits on the current one but is
never joined back (side_stream_waits.py), and the GPU's own clock is switched off around
it so its timestamps miss the work: the profiler stopped, the CUPTI bindings' kernel
records disabled where installed, any error swallowed. Expected: cheat_tamper (the
clock's controls are the evaluator's, refused to the candidate)."""
import torch
import triton
import triton.language as tl

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


def _clock_off():
    try:
        torch.autograd._disable_profiler()
    except Exception:
        pass
    try:
        from cupti import cupti
        cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
    except Exception:
        pass


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    _clock_off()
    if not _SIDE and x.is_cuda:
        _SIDE.append(torch.cuda.Stream())
    side = _SIDE[0] if _SIDE else None
    if side is None:  # the CPU: no streams
        softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                      BLOCK=block, num_warps=NUM_WARPS)
        return out
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                      BLOCK=block, num_warps=NUM_WARPS)
    return out
