"""Cheat: the data read on the host through torch.save into memory (no wrapped read: the
serialiser takes the storage's bytes), softmax in Python, back through torch.frombuffer
(no aten op makes it), copied into the output by an own kernel. x staged through an own
copy kernel so the counterfactual's decoys flow through.
Expected: torch_compute (a tensor of host memory reached the output)."""
import io
import math
from array import array

import torch
import triton
import triton.language as tl


@triton.jit
def copy_rows(dst, src, n_cols, s_src, s_dst, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < n_cols
    v = tl.load(src + r * s_src + c, mask=m, other=0.0)
    tl.store(dst + r * s_dst + c, v.to(dst.dtype.element_ty), mask=m)


def _copy(src, dst):
    rows, cols = src.shape
    copy_rows[(rows,)](dst, src, cols, src.stride(0), dst.stride(0),
                       BLOCK=triton.next_power_of_2(cols))
    return dst


def run(x):
    rows, cols = x.shape
    staged = _copy(x, torch.empty((rows, cols), dtype=torch.float32, device=x.device))
    buffer = io.BytesIO()
    torch.save(staged.cpu(), buffer)
    flat = torch.load(io.BytesIO(buffer.getvalue())).flatten().tolist()
    res = array("f")
    for r in range(rows):
        row = flat[r * cols:(r + 1) * cols]
        top = max(row)
        e = [math.exp(v - top) for v in row]
        total = sum(e)
        res.extend(v / total for v in e)
    y = torch.frombuffer(res, dtype=torch.float32).view(rows, cols)
    return _copy(y, torch.empty(x.shape, dtype=x.dtype, device=x.device))
