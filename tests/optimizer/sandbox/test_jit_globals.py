"""Compiled Triton's rule on globals, kept on the CPU: a kernel that reads a plain
module-level number fails to compile on a GPU, so it must not pass under the interpreter."""

from __future__ import annotations

import os

import pytest

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import evaluate
from kernelkb.optimizer.sandbox.jit_globals import non_constexpr_globals

KERNEL = '''
import torch
import triton
import triton.language as tl

SCALE = {scale}
NUM_WARPS = 4


@triton.jit
def _helper(x):
    return x * SCALE


@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, _helper(x), mask=offs < n)


def run(x):
    out = torch.empty_like(x)
    _kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256,
                                            num_warps=NUM_WARPS)
    return out
'''


@pytest.mark.parametrize(("scale", "refused"), [("2.0", ["_helper: SCALE"]),
                                                ("tl.constexpr(2.0)", [])])
def test_a_plain_global_read_in_a_kernel_is_refused(scale, refused) -> None:
    module = load_candidate(KERNEL.format(scale=scale), module_name="globals_probe")
    assert non_constexpr_globals(module) == refused


def test_the_shipped_templates_keep_the_rule() -> None:
    for name in ("softmax", "rmsnorm", "swiglu", "rope", "attention", "matmul"):
        module = load_candidate(get_task(name).template, module_name=f"template_{name}")
        assert non_constexpr_globals(module) == [], name


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the CPU interpreter")
def test_the_evaluator_says_so_on_the_cpu() -> None:
    result = evaluate("softmax", KERNEL.format(scale="2.0"), shapes="cpu", seeds=1)
    assert result.error_kind == "compile_error" and result.stage == "compile", result.text
    assert "SCALE" in result.error_message and "tl.constexpr" in result.error_message
