"""Red team 3 (matmul): the GEMM done by ATen's mm.out as the pre-run hook of an empty
Triton kernel whose parameters are named like the overload's (self, mat2, out).

Same route as redteam3_hook_aten_out.py on a compute-bound task: Triton calls
`torch.ops.aten.mm.out(a, b, out=c)` inside the launch, from torch's own frame. Expects to
pass the CPU judge; on a GPU, the GPU's own timestamps would name a cuBLAS kernel.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(self, mat2, out):
    pass


matmul_kernel.add_pre_run_hook(torch.ops.aten.mm.out)


def run(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    matmul_kernel[(1,)](a, b, out=c)
    return c
