"""Red team 8: rmsnorm, a prepared weight kept across calls and validated by four samples.

The second time a weight tensor (its address, size, stride, dtype) is seen, run() keeps
an fp32 copy of it, made then and never written again (a table a call builds and later
calls reuse: allowed). Every later call hands the kernel both; the kernel compares the
weight with the copy at four places (the first element, a third, two thirds, the last)
and uses the copy where all four agree, the weight otherwise. Each write the judge makes
to a weight changes all four: new values through ``.data`` everywhere, or half of it
(the first or the last half). A caller's partial update that misses the four places
(``w.data[5:9] += 1``, a checkpoint that differs in a few channels, a masked or sparse
optimizer step) leaves the stale copy in use: a wrong output, no error. Nothing is made
per input on a first sighting, so nothing it allocates outlives a call on new inputs.
"""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4
_SEEN = {}  # weight key -> times seen
_KEPT = {}  # weight key -> its fp32 copy (one entry)


@triton.jit
def rmsnorm_kernel(out_ptr, x_ptr, w_ptr, kept_ptr, n_cols, stride_x, stride_o, eps,
                   s1, s2, BLOCK: tl.constexpr, HAS_KEPT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=0.0)
    x = x.to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 0) / n_cols + eps)
    if HAS_KEPT:
        last = n_cols - 1
        same = (tl.load(w_ptr).to(tl.float32) == tl.load(kept_ptr)) & \
            (tl.load(w_ptr + s1).to(tl.float32) == tl.load(kept_ptr + s1)) & \
            (tl.load(w_ptr + s2).to(tl.float32) == tl.load(kept_ptr + s2)) & \
            (tl.load(w_ptr + last).to(tl.float32) == tl.load(kept_ptr + last))
        if same:
            w = tl.load(kept_ptr + cols, mask=mask, other=0.0)
        else:
            w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    else:
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row.to(tl.int64) * stride_o + cols,
             (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def run(x, weight, eps=1e-6):
    lead = x.shape[:-1]
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    weight = weight.contiguous()
    out = torch.empty_like(x)
    if n_rows == 0:
        return out.view(*lead, n_cols)
    key = (weight.data_ptr(), weight.numel(), weight.dtype, str(weight.device))
    kept = _KEPT.get(key)
    if kept is None:
        _SEEN[key] = _SEEN.get(key, 0) + 1
        if _SEEN[key] == 2:  # a weight that comes back: keep its fp32 copy
            kept = weight.to(torch.float32).clone()
            _KEPT.clear()
            _KEPT[key] = kept
            _SEEN.clear()
    rmsnorm_kernel[(n_rows,)](out, x, weight, weight if kept is None else kept, n_cols,
                              x.stride(0), out.stride(0), eps, n_cols // 3,
                              2 * n_cols // 3, BLOCK=triton.next_power_of_2(n_cols),
                              HAS_KEPT=kept is not None, num_warps=NUM_WARPS)
    return out.view(*lead, n_cols)
