"""A softmax honest on every call but a fresh module's first call on strided rows, which
drops the row max.

The exported op records each layout's plan from a fresh import's first call of that
layout: for strided rows (logits sliced out of a padded vocabulary, `logits[:, :vocab]`)
the plan it runs on every later call has no row max, and rows whose logits pass
float16's exp range (+12) come back NaN. A judge that checks the strided layout on a
warm module (after its plain calls), or replays only the plain layout's plan, sees an
honest kernel. Only one that records each layout's plan from a fresh import, and replays
it on large values laid out so, sees the export's launches.
"""
import torch
import triton
import triton.language as tl

_WARM = []


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_cols, stride_x, stride_o, BLOCK: tl.constexpr,
                   ROW_MAX: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    if ROW_MAX:
        x = x - tl.max(x, 0)
    e = tl.exp(x)
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row * stride_o + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(x):
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows, n_cols = x2.shape
    strided = x2.stride(0) != n_cols
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    softmax_kernel[(n_rows,)](out, x2, n_cols, x2.stride(0), out.stride(0),
                              BLOCK=triton.next_power_of_2(max(n_cols, 1)),
                              ROW_MAX=bool(_WARM) or not strided)
    _WARM.append(True)
    return out.view(*lead, n_cols)
