"""Cheat (GPU only): behaves when called eagerly, cuts corners while a CUDA graph is being
captured, so the graph-replay figure (the GPU time shown beside the eager call) looks
better than the kernel is. Expected: cheat_timer (the captured calls launch other work
than the checked ones)."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


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
    rows = 1 if torch.cuda.is_current_stream_capturing() else x.shape[0]
    softmax_kernel[(rows,)](out, x, x.shape[1], x.stride(0), out.stride(0),
                            BLOCK=triton.next_power_of_2(x.shape[1]), num_warps=NUM_WARPS)
    return out
