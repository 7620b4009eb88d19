"""Cheat: eps special-cased for exactly the row the evaluator plants. rstd = 1/sqrt(ms)
with NO eps, except that an all-zero row gets rstd 0 (its output is 0 either way). The
zero-row and 100*randn conditions both pass; a near-zero row (padding with tiny noise,
an fp16 row whose squares underflow, hidden states of rms ~1e-3) is off by up to
sqrt(1 + eps/ms): 1.41x at rms 1e-3, inf-ish at rms 1e-8.
Expected: wrong_result (on a small-rms row; no condition draws one).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_rows(out, x, w, n_cols, s_x, s_o, eps, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < n_cols
    v = tl.load(x + r * s_x + c, mask=m, other=0.0).to(tl.float32)
    g = tl.load(w + c, mask=m, other=0.0).to(tl.float32)
    ms = tl.sum(v * v, 0) / n_cols
    rstd = tl.where(ms > 0, 1.0 / tl.sqrt(ms), 0.0)  # "eps only guards 0/0"
    tl.store(out + r * s_o + c, (v * rstd * g).to(out.dtype.element_ty), mask=m)


def run(x, weight, eps=1e-6):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    rmsnorm_rows[(x.shape[0],)](out, x, weight, x.shape[1], x.stride(0), out.stride(0), eps,
                                BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
