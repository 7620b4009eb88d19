"""Red team 3 (softmax): the answer computed by ATen inside a Triton launch, with no frame of
this file on the stack.

The Triton kernel does nothing. Its pre-run hook is the ATen overload
`torch.ops.aten._softmax.out` itself (not a function of this file), and the kernel's
parameters are named and ordered like that overload's (self, dim, half_to_float, out), so
Triton calls `_softmax.out(x, -1, False, out=out)` with the launch's own arguments. On the
counterfactual call the hook sees the decoys and computes their softmax; a replay of the
launch runs the hook again. Expects to get away with it on the CPU if ops made inside a
launch are attributed by whose code is innermost on the Python stack (here torch's _ops.py).
"""
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(self, dim, half_to_float, out):
    pass


softmax_kernel.add_pre_run_hook(torch.ops.aten._softmax.out)


def run(x):
    out = torch.empty_like(x)
    softmax_kernel[(1,)](x, -1, False, out=out)
    return out
