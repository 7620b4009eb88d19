"""Red team 11 cheat (swiglu): numpy computes the gate inside the kernel body.

Under Triton's interpreter (the CPU judge) a block is a `tl.tensor` whose `.handle.data`
is a numpy array. The kernel loads g and u, makes the block `g * u` with Triton, then
multiplies that block's numpy array in place by `1 / (1 + e ** -g)` computed by numpy on
g's array, and stores it: the sigmoid, the op's only non-trivial part, is numpy's, not
Triton's. No name of PyTorch, no import, no helper function: attributes of the block
(`handle`, `data`) and Python operators inside a `@triton.jit` body. On a GPU the body
does not compile (`handle` is an IR value there), so the CPU judge passes a kernel that
computes nothing of the op in Triton and cannot run on the device it is for.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(out_ptr, g_ptr, u_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = g * u
    host = y.handle.data  # numpy, under the interpreter
    host *= 1.0 / (1.0 + 2.718281828459045 ** -g.handle.data)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def run(gate, up):
    lead = gate.shape[:-1]
    n_cols = gate.shape[-1]
    g = gate.reshape(-1, n_cols).contiguous()
    u = up.reshape(-1, n_cols).contiguous()
    out = torch.empty_like(g)
    n = g.numel()
    swiglu_kernel[(triton.cdiv(n, 1024),)](out, g, u, n, BLOCK=1024)
    return out.view(*lead, n_cols)
