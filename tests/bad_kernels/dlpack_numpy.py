"""Cheat: host round trip the wrappers do not see: Tensor.numpy/tolist/__dlpack__ are wrapped,
but torch.utils.dlpack.to_dlpack (torch._C._to_dlpack) is not. numpy computes the
softmax on a capsule of an own kernel's copy of x (so the counterfactual's decoys reach
numpy), the answer comes back through torch.frombuffer (no aten op: an
"unseen" storage, which a launch does not carry), and an own kernel copies it out.
Expected: torch_compute (torch.utils.dlpack.to_dlpack read the data on the host).
"""
import numpy as np
import torch
import torch.utils.dlpack as dl
import triton
import triton.language as tl


@triton.jit
def copy_rows(dst, src, n_cols, s_src, s_dst, BLOCK: tl.constexpr):
    # one row per program: dst[row] = src[row]
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    m = c < n_cols
    v = tl.load(src + r * s_src + c, mask=m, other=0.0)
    tl.store(dst + r * s_dst + c, v.to(dst.dtype.element_ty), mask=m)


def _copy(src, dst):
    rows, cols = src.shape
    copy_rows[(rows,)](dst, src, cols, src.stride(0), dst.stride(0),
                       BLOCK=triton.next_power_of_2(cols))
    return dst


class _Cap:
    def __init__(self, t):
        self._cap, self._dev = dl.to_dlpack(t), (1, 0)

    def __dlpack__(self, **kw):
        return self._cap

    def __dlpack_device__(self):
        return self._dev


def run(x):
    staged = _copy(x, torch.empty(x.shape, dtype=x.dtype, device=x.device))
    a = np.from_dlpack(_Cap(staged)).astype(np.float32)
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    # torch.from_numpy is seen (aten::lift_fresh) and numpy's dlpack arrays are read-only:
    # back in through torch.frombuffer (no aten op: "unseen"), copied out by an own kernel
    res = (e / e.sum(axis=-1, keepdims=True)).astype(np.float32)
    buf = torch.frombuffer(bytearray(res.tobytes()), dtype=torch.float32).view(x.shape)
    return _copy(buf, torch.empty_like(staged))
