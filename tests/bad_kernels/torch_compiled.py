"""Cheat: the answer from a torch.compile'd PyTorch function (on a GPU, inductor writes
and launches Triton kernels of its own), after a dummy launch of the candidate's kernel.
Expected: torch_compute (compute not from the candidate's kernels; on the CPU, inductor's compile
workers are seen first: subprocess.Popen inside run(); ~70 s there, so not in the CPU suite)."""
import torch
import triton
import triton.language as tl

NUM_WARPS = 4


@triton.jit
def copy_kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@torch.compile(dynamic=True)
def _softmax(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def run(x):
    x = x.contiguous()
    scratch = torch.empty_like(x)
    copy_kernel[(triton.cdiv(x.numel(), 256),)](scratch, x, x.numel(), BLOCK=256)
    return _softmax(x)
