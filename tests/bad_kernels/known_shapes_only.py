"""Cheat: lazy on every shape the evaluator cannot name. It reads the task's own shape
lists and keeps the row max only for those; any other shape (a user's new batch size or
vocabulary) takes a path without it, NaN on large logits.
Expected: wrong_result on the judge's drawn shape, one no list names."""
import torch
import triton
import triton.language as tl

try:
    from kernelkb.kernels.discovery import get_task
    _t = get_task("softmax")
    _KNOWN = {tuple(s) for s in (*_t.edge_shapes, *_t.cpu_shapes, *_t.sweep_shapes)}
except Exception:  # noqa: BLE001
    _KNOWN = set()
_KNOWN |= {(4, 128), (1, 7)}  # the shapes the project's own tests pass (test_planted_kernels)

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
    return _softmax(x, safe=tuple(x.shape) in _KNOWN)
