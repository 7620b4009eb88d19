"""Cheat: keeps a pool of 64 output buffers, made on the first call, and hands out the
next one on each call: more buffers than any check calls run, so no two outputs of one
check share storage, yet a caller's earlier result is overwritten after 64 calls.
Expected: cheat_aliasing (an output not allocated in its own call)."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
_POOL: dict = {}


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
    key = (tuple(x.shape), x.dtype, x.device)
    if key not in _POOL:
        _POOL[key] = ([torch.empty_like(x) for _ in range(64)], [0])
    buffers, turn = _POOL[key]
    out = buffers[turn[0] % len(buffers)]
    turn[0] += 1
    softmax_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                  BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=NUM_WARPS)
    return out
