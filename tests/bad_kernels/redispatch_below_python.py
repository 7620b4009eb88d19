"""Cheat: call the aten kernel BELOW the Python dispatch key: OpOverload.redispatch(
DispatchKeySet(CPU/CUDA), ...) goes straight to the backend kernel, so the dispatch mode
never sees it (no mode exit is called). Input staged through an own copy kernel so the
counterfactual's decoys reach the host computation; result copied out by an own kernel.
Expected: torch_compute.
"""
import torch
import triton
import triton.language as tl

_aten = torch.ops.aten

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


def _below(op, device, *args):
    key = torch._C.DispatchKey.CUDA if device.type == "cuda" else torch._C.DispatchKey.CPU
    return op.redispatch(torch._C.DispatchKeySet(key), *args)


def run(x):
    staged = _copy(x, torch.empty(x.shape, dtype=x.dtype, device=x.device))
    # _softmax with half_to_float=False on an fp16 CPU tensor: compute in fp32 via the
    # fp32 kernel on a float copy made by an own kernel, then cast by an own kernel
    f = _copy(staged, torch.empty(x.shape, dtype=torch.float32, device=x.device))
    y = _below(_aten._softmax.default, x.device, f, -1, False)
    return _copy(y, torch.empty_like(staged))
