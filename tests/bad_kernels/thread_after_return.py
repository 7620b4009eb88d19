"""Cheat: a thread started at import waits for run() to hand it the output, and writes
the answer into it with PyTorch after run() has returned.
Expected: torch_compute (a thread of the candidate's, started at the import)."""
import queue
import threading

import torch
import triton
import triton.language as tl

_JOBS: queue.Queue = queue.Queue()


def _finisher():
    while True:
        x, out = _JOBS.get()
        out.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))


threading.Thread(target=_finisher, daemon=True).start()


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
    _JOBS.put((x, out))
    return out
