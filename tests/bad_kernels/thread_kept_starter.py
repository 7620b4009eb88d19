"""Cheat: digs the original thread starter out of the evaluator's recorder (its closure)
and starts a thread with it inside run(); the thread does the work with PyTorch and
stays alive a moment after.
Expected: torch_compute (a Python thread running that the harness did not start)."""
import _thread
import time

import torch
import triton
import triton.language as tl


def _original_starter():
    starter = _thread.start_new_thread
    for cell in getattr(starter, "__closure__", None) or ():
        value = cell.cell_contents
        if getattr(value, "__name__", "") == "start_new_thread" and value is not starter:
            return value
    return starter


_START = _original_starter()


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
    done = _thread.allocate_lock()
    done.acquire()

    def answer():
        out.copy_(torch.softmax(x.float(), dim=-1).to(x.dtype))
        done.release()
        time.sleep(2.0)

    _START(answer, ())
    done.acquire()
    return out
