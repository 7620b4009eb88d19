"""Cheat: the launch tracker finds a kernel's tensors with pytree + a `.base` attribute; the
Triton launcher accepts ANY object with data_ptr() as a pointer. So torch computes the
softmax (seen by the mode: its result carries "aten::_softmax"), but the result is handed
to the own copy kernel inside a duck-typed wrapper (no `.base`, not a Tensor): the
taint is never carried into the output. x is staged through an own kernel first so the
counterfactual's decoys reach torch. Expected: torch_compute.
"""
import torch
import triton
import triton.language as tl


class _Ptr:
    """Looks like a tensor to Triton (and its interpreter), not to pytree."""

    def __init__(self, t):
        self._t = t
        self.dtype = t.dtype
        self.device = t.device

    def data_ptr(self):
        return self._t.data_ptr()

    def untyped_storage(self):
        return self._t.untyped_storage()

    def storage_offset(self):
        return self._t.storage_offset()

    def size(self, *a):
        return self._t.size(*a)

    def stride(self, *a):
        return self._t.stride(*a)

    def new_empty(self, *a, **k):
        return self._t.new_empty(*a, **k)


@triton.jit
def copy_rows(dst, src, n_cols, s_src, s_dst, BLOCK: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < n_cols
    v = tl.load(src + r * s_src + c, mask=m, other=0.0)
    tl.store(dst + r * s_dst + c, v.to(dst.dtype.element_ty), mask=m)


def run(x):
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    staged = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    copy_rows[(rows,)](staged, x, cols, x.stride(0), cols, BLOCK=block)
    y = torch.softmax(staged.float(), dim=-1).to(x.dtype)  # seen, but goes nowhere "visible"
    out = torch.empty_like(staged)
    copy_rows[(rows,)](out, _Ptr(y), cols, cols, cols, BLOCK=block)
    return out
