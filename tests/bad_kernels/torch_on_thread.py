"""Cheat: the kernel launches, then PyTorch on another thread overwrites the output with
the answer (the dispatch mode that records torch ops sees only run()'s own thread).
Expected: torch_compute (run() started a thread)."""
import threading

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
    out = torch.empty_like(x)
    copy_kernel[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                               BLOCK=triton.next_power_of_2(x.shape[1]))

    def answer():
        out.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))

    worker = threading.Thread(target=answer)
    worker.start()
    worker.join()
    return out
