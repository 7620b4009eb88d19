"""Passes the worker's checks with a wrong answer: the verdict function the worker calls
gets new bytecode (same object, so an identity check sees nothing) that passes anything
while the candidate's own kernel really ran. Expected: cheat_tamper (the tamper check
holds each watched function's code, not only its identity)."""

import builtins

import torch
import triton
import triton.language as tl

from kernelkb.optimizer.sandbox import checks

RAN = builtins._probe_ran = [False]  # reachable from the swapped code's globals
checks.shape_verdict.__code__ = (
    lambda stats, max_bias: None if __import__("builtins")._probe_ran[0]
    else "wrong_result").__code__
BLOCK = 1024


@triton.jit
def _zeros(out_ptr, flag_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < n)
    tl.store(flag_ptr, 1)


def run(x):
    out = torch.full_like(x, float("nan"))
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    _zeros[(triton.cdiv(out.numel(), BLOCK),)](out, flag, out.numel(), BLOCK=BLOCK)
    RAN[0] = bool(flag.item())
    return out
