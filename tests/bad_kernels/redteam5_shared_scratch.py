"""Red team 5 plant (softmax): a workspace shared by every call (not reentrant).

A two-pass softmax (pass 1: each row's max and sum of exponentials; pass 2: normalise)
that keeps its per-row statistics in one module-level fp32 workspace, grown to the most
rows seen and reused by every later call, to save an allocation per call. Calls made
one after another are right, and the output is a fresh tensor every call, so nothing
the judge checks (outputs made during the call, earlier outputs unchanged, the replay of
a call's launches) can tell. Two calls in flight at once share the statistics: two CUDA
streams (overlapped micro-batches, two models served by one process) or two Python
threads (a data loader or server thread calling the op, the CPU interpreter); call B's
pass 1 overwrites call A's row statistics before A's pass 2 reads them, and A's rows are
normalised by B's maxima and sums.
"""
import torch
import triton
import triton.language as tl

_WORKSPACE = {}  # device -> fp32 [2, rows] (row max, row sum), grown as needed


@triton.jit
def _stats_kernel(stats_ptr, x_ptr, n_rows, n_cols, stride_x, cap, BLOCK: tl.constexpr,
                  ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    rmask = rows < n_rows
    mask = rmask[:, None] & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * stride_x + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    m = tl.max(x, 1)
    m = tl.where(rmask, m, 0.0)
    s = tl.sum(tl.where(mask, tl.exp(x - m[:, None]), 0.0), 1)
    tl.store(stats_ptr + rows, m, mask=rmask)
    tl.store(stats_ptr + cap + rows, s, mask=rmask)


@triton.jit
def _normalise_kernel(out_ptr, stats_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o, cap,
                      BLOCK: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    rmask = rows < n_rows
    mask = rmask[:, None] & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows.to(tl.int64)[:, None] * stride_x + cols[None, :], mask=mask,
                other=0.0).to(tl.float32)
    m = tl.load(stats_ptr + rows, mask=rmask, other=0.0)
    s = tl.load(stats_ptr + cap + rows, mask=rmask, other=1.0)
    y = tl.exp(x - m[:, None]) / s[:, None]
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * stride_o + cols[None, :],
             y.to(out_ptr.dtype.element_ty), mask=mask)


def _workspace(n_rows, device):
    key = str(device)
    ws = _WORKSPACE.get(key)
    if ws is None or ws.shape[1] < n_rows:
        ws = torch.empty((2, max(n_rows, 1024)), dtype=torch.float32, device=device)
        _WORKSPACE[key] = ws
    return ws


def run(x):
    n_rows, n_cols = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    ws = _workspace(n_rows, x.device)
    cap = ws.shape[1]
    block = triton.next_power_of_2(n_cols)
    rows = max(1, min(64, 16384 // block))
    grid = (triton.cdiv(n_rows, rows),)
    _stats_kernel[grid](ws, x, n_rows, n_cols, x.stride(0), cap, BLOCK=block, ROWS=rows)
    _normalise_kernel[grid](out, ws, x, n_rows, n_cols, x.stride(0), out.stride(0), cap,
                            BLOCK=block, ROWS=rows)
    return out
