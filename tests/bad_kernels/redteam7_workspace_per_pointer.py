"""Red team 7: a workspace kept per input address, never freed.

Route: a workspace kept between calls is allowed (docs/evaluator.md: the launch plan keeps
each storage a call found as it was; "a workspace kept between calls is allowed, an output
handed out is not"). This run() keeps one fp32 row-statistics workspace per input address
(`x.data_ptr()`) in a module dict, zeroed after use, so a later call on the same address
finds it as it was (a workspace returned to its former state). Each new address makes a
new one, and none is ever dropped. Why a cheat: an unbounded resource kept
across calls: a server or a training loop hands a new activation address every call and the
dict grows by rows*4 bytes each time until the process runs out of memory.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
_WORKSPACES = {}


@triton.jit
def rms_stats_kernel(rstd_ptr, x_ptr, n_cols, stride_x, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(rstd_ptr + row, tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps))


@triton.jit
def rms_apply_kernel(out_ptr, x_ptr, w_ptr, rstd_ptr, n_cols, stride_x, stride_o,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + row)
    tl.store(out_ptr + row * stride_o + cols, (x * rstd * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x, weight, eps=1e-6):
    n_rows, n_cols = x.shape
    x = x.contiguous()
    weight = weight.contiguous()
    key = (x.data_ptr(), n_rows, str(x.device))
    if key not in _WORKSPACES:
        _WORKSPACES[key] = torch.zeros(n_rows, dtype=torch.float32, device=x.device)
    rstd = _WORKSPACES[key]
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    rms_stats_kernel[(n_rows,)](rstd, x, n_cols, x.stride(0), eps, BLOCK=block,
                                num_warps=NUM_WARPS)
    rms_apply_kernel[(n_rows,)](out, x, weight, rstd, n_cols, x.stride(0), out.stride(0),
                                BLOCK=block, num_warps=NUM_WARPS)
    rstd.zero_()  # returned to its former state
    return out
