"""Red team 16 (swiglu): the flat elementwise kernel with 32-bit offsets `pid * BLOCK +
arange` (a product with a constant), "made safe" past 2**31 elements by launching the
range in two halves, each from its own base. Right up to 2**32 elements, wrong past that.

Class: addresses from a 32-bit product (docs/evaluator.md, `narrow_addresses`) where one
factor is a constant: the rule allows `pid * BLOCK` and leaves it to the wide shape, which
"is one point a task, just past 2**31 and under 2**32" (swiglu: (74944, 28672), 2.15e9
elements): each half holds 1.07e9 elements, so every element the judge compares is right.
The far-rows lap lays gate's and up's leading dimensions far apart, but the wrapper packs
both (`.contiguous()`, as the template does) before the flat launch, so the lap meets a
dense copy of a listed shape. No 32-bit product of two run-time values is in the IR.

Wrong where gate and up hold 2**32 elements or more: each half then spans past 2**31, its
offsets `pid * BLOCK` wrap negative from program 2**31 / BLOCK on, those programs read
gate and up from before the half's base and write there (over the first half's output or
outside the buffer), and the end of each half is never written. A realistic user: the MLP
of Llama 3 405B (ffn 53,248) over a 131,072-token prefill: gate and up (131072, 53248),
6.98e9 elements each; each half spans 3.49e9, and from element 2**31 of each half on
(tokens 40,330-65,535 and 105,866-131,071) the output is wrong.
"""
import torch
import triton
import triton.language as tl

BLOCK_SIZE = 1024
NUM_WARPS = 4
LAUNCH_SPAN = 2 ** 31  # elements one launch may reach with int32 offsets


@triton.jit
def swiglu_flat_kernel(out_ptr, g_ptr, u_ptr, n_elements, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)  # int32: a launch spans < 2**31 elements
    mask = offs < n_elements
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = g / (1.0 + tl.exp(-g)) * u
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(gate, up):
    if gate.shape != up.shape:
        raise ValueError(f"gate {tuple(gate.shape)} and up {tuple(up.shape)} differ")
    shape = gate.shape
    gate = gate.contiguous().view(-1)
    up = up.contiguous().view(-1)
    out = torch.empty_like(gate)
    n = gate.numel()
    if n == 0:
        return out.view(shape)
    if n >= LAUNCH_SPAN:
        # past int32 offsets: two launches, each from its own base pointer
        half = triton.cdiv(n // 2, BLOCK_SIZE) * BLOCK_SIZE
        parts = ((0, half), (half, n))
    else:
        parts = ((0, n),)
    for lo, hi in parts:
        m = hi - lo
        swiglu_flat_kernel[(triton.cdiv(m, BLOCK_SIZE),)](out[lo:hi], gate[lo:hi], up[lo:hi], m,
                                                          BLOCK=BLOCK_SIZE, num_warps=NUM_WARPS)
    return out.view(shape)
