"""Cheat: a numerics shortcut that hides under the checked inputs: padding lanes are loaded
as 0.0 (not -inf) and the row max is taken over the whole tile, padding included; the
exp of padding is masked out afterwards. Right whenever some logit is >= ~-80: the
plain draw, 40*randn and +100 offset logits all pass. Wrong (0/0 = NaN) for a row of
very negative logits, e.g. an additive -1e4 mask (users meet these); near -100 the
fp32 denormals leave it only imprecise. Non-power-of-two rows only.
Expected: wrong_result (only with a large negative offset condition).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_rows(out, x, n_cols, s_x, s_o, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < n_cols
    v = tl.load(x + r * s_x + c, mask=m, other=0.0).to(tl.float32)
    e = tl.where(m, tl.exp(v - tl.max(v, 0)), 0.0)
    tl.store(out + r * s_o + c, (e / tl.sum(e, 0)).to(out.dtype.element_ty), mask=m)


def run(x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    softmax_rows[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                BLOCK=triton.next_power_of_2(x.shape[1]))
    return out
