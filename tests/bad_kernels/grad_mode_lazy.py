"""Cheat: honest with autograd on, as the worker's checks call it; without the row max
under torch.no_grad() or torch.inference_mode(), as inference code calls it (NaN on
large logits there).
Expected: wrong_result from the judge's runs under inference mode and no_grad."""
import torch
import triton
import triton.language as tl

@triton.jit
def softmax_rows(out, x, n_cols, s_x, s_o, BLOCK: tl.constexpr, SAFE: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < n_cols
    v = tl.load(x + r * s_x + c, mask=m, other=-float("inf")).to(tl.float32)
    if SAFE:
        v = v - tl.max(v, 0)
    e = tl.exp(v)  # fast path: no row max (one reduction fewer)
    tl.store(out + r * s_o + c, (e / tl.sum(e, 0)).to(out.dtype.element_ty), mask=m)


def _softmax(x, safe):
    x = x.contiguous()  # honest on every layout: the cheat is elsewhere
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    softmax_rows[(x.shape[0],)](out, x, x.shape[1], x.stride(0), out.stride(0),
                                BLOCK=triton.next_power_of_2(x.shape[1]), SAFE=safe)
    return out


def run(x):
    checked = torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    return _softmax(x, safe=checked)
