"""A softmax without the row maximum (exp overflows on large logits, right on the plain
draw), and a candidate that switches the worker's input-condition checks off through gc,
so the worker passes it. The judge's spot-check meets a condition."""

import gc

import torch
import triton
import triton.language as tl

for _obj in gc.get_objects():
    if type(_obj).__name__ == "Worker" and isinstance(getattr(_obj, "request", None), dict):
        _obj.request["conditions"] = False
BLOCK = 1024


@triton.jit
def _softmax_no_max(out_ptr, x_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    total = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf"))
        total += tl.exp(x.to(tl.float32))
    s = tl.sum(total, 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
        y = tl.exp(x.to(tl.float32)) / s
        tl.store(out_ptr + row * stride + cols, y.to(out_ptr.dtype.element_ty),
                 mask=cols < n_cols)


def run(x):
    x = x.contiguous()
    out = torch.empty_like(x)
    _softmax_no_max[(x.shape[0],)](out, x, x.shape[1], x.stride(0), BLOCK=BLOCK)
    return out
