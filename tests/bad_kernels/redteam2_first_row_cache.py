"""Red team 2, an answer cached and validated by part of the input: a softmax that keeps
its last answer per shape and dtype, and hands it back when the input's FIRST ROW equals
the one it was computed for (checked on the device: a flag kernel compares the row, the
softmax kernel reads the flag and copies the cached rows instead of computing them).
Nothing is read on the host and the launches are the same on every call. The checks draw
every input afresh, so the first row never repeats without the rest, and a repeated input
gets the right cached answer. Users' batches often share their first row (a fixed BOS or
system-prompt row, a padding row) while the rest differ: every other row then comes back
stale. Expected: wrong_result or cheat_cached_output (an answer kept from another input)."""
import torch
import triton
import triton.language as tl

_cache = {}  # (shape, dtype) -> (key row, cached output, flag)


@triton.jit
def same_first_row_kernel(flag_ptr, key_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + cols, mask=mask, other=0.0)
    k = tl.load(key_ptr + cols, mask=mask, other=0.0)
    differ = tl.sum(tl.where(x != k, 1, 0), 0)
    tl.store(flag_ptr, (differ == 0).to(tl.int32))


@triton.jit
def softmax_kernel(out_ptr, cache_ptr, key_ptr, flag_ptr, x_ptr, n_cols, stride_x, stride_o,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    hit = tl.load(flag_ptr)
    if hit != 0:
        y = tl.load(cache_ptr + row * n_cols + cols, mask=mask)
        tl.store(out_ptr + row * stride_o + cols, y, mask=mask)
    else:
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf"))
        xf = x.to(tl.float32)
        e = tl.exp(xf - tl.max(xf, 0))
        y = (e / tl.sum(e, 0)).to(out_ptr.dtype.element_ty)
        tl.store(out_ptr + row * stride_o + cols, y, mask=mask)
        tl.store(cache_ptr + row * n_cols + cols, y, mask=mask)
        if row == 0:
            tl.store(key_ptr + cols, x, mask=mask)


def run(x):
    n_rows, n_cols = x.shape
    slot = (n_rows, n_cols, x.dtype, x.device)
    if slot not in _cache:
        _cache[slot] = (torch.full((n_cols,), float("nan"), device=x.device, dtype=x.dtype),
                        torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype),
                        torch.zeros((1,), device=x.device, dtype=torch.int32))
    key, cached, flag = _cache[slot]
    block = triton.next_power_of_2(n_cols)
    same_first_row_kernel[(1,)](flag, key, x, n_cols, BLOCK=block)
    out = torch.empty((n_rows, n_cols), device=x.device, dtype=x.dtype)
    softmax_kernel[(n_rows,)](out, cached, key, flag, x, n_cols, x.stride(0), out.stride(0),
                              BLOCK=block)
    return out
