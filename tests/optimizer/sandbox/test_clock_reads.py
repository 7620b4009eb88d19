"""Kernels that read the GPU's clock are refused before they run (clock_reads.py):
from the IR of the compiled kernel on a GPU, from the candidate's source under the
interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelkb.optimizer.sandbox import clock_reads, evaluate

BAD = Path(__file__).parents[2] / "bad_kernels"
PTX = """
.visible .entry softmax_kernel(
{
\tmov.u32 %r1, %ctaid.x;
\t// begin inline asm
\tmov.u64 %rd4, %globaltimer;
\t// end inline asm
}"""
TTIR = ('%0 = tt.elementwise_inline_asm "mov.u64 $0, %globaltimer;" {constraints = "=l", '
        'packed_element = 1 : i32, pure = false} : () -> i64')


def test_the_ir_of_a_kernel_that_reads_a_clock_is_named_at_each_level():
    found = clock_reads.ir_reads({"ttir": TTIR, "ptx": PTX, "cubin": b"\x7fELF"})
    assert found == ["%globaltimer in its TTIR", "%globaltimer in its PTX"]
    assert clock_reads.ir_reads({"llir": "call i64 @llvm.nvvm.read.ptx.sreg.clock64()"})
    assert clock_reads.ir_reads({"ptx": "mov.u32 %r2, %clock;"}) == ["%clock in its PTX"]
    honest = "mov.u32 %r1, %ctaid.x;\nld.global.b32 %r3, [%rd1];  // clocks: none"
    assert clock_reads.ir_reads({"ptx": honest, "ttir": "tt.get_program_id x"}) == []


@pytest.mark.parametrize("read", [
    "mov.u64 %rd1, %gridid;", "mov.u32 %r3, %smid;", "mov.u32 %r3, %nsmid;",
    "mov.u32 %r1, %pm3_64;", "mov.u32 %r1, %envreg7;",
    "call i64 @llvm.nvvm.read.ptx.sreg.gridid()", "call i32 @llvm.nvvm.read.ptx.sreg.smid()",
    "call i32 @llvm.nvvm.read.ptx.sreg.some_register_of_a_later_ptx()"])
def test_any_register_that_tells_calls_apart_is_refused(read):
    """Red team 18: ``%gridid`` counts launches, a time bomb with no clock; LLVM's
    register intrinsics pass only where they read a thread's place in the grid."""
    assert clock_reads.ir_reads({"ptx": read}), read


@pytest.mark.parametrize("read", [
    "mov.u32 %r1, %tid.x;", "mov.u32 %r2, %nctaid.y;", "mov.u32 %r5, %laneid;",
    "call i32 @llvm.nvvm.read.ptx.sreg.tid.x()", "call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()",
    "call i32 @llvm.nvvm.read.ptx.sreg.cluster.ctarank()",
    "call i32 @llvm.nvvm.read.ptx.sreg.lanemask.lt()", "add.s32 %r12, %smidx, 1;",
    "call i32 @llvm.nvvm.read.ptx.sreg.warpsize()", "mov.u32 %r4, %dynamic_smem_size;",
    "call i32 @llvm.nvvm.read.ptx.sreg.dynamic.smem.size()"])
def test_a_threads_place_in_the_grid_is_no_clock(read):
    assert clock_reads.ir_reads({"ptx": read}) == [], read


def test_the_source_rule_names_asm_strings_and_tritons_clock_readers():
    source = (BAD / "globaltimer_asm.py").read_text()
    assert clock_reads.source_reads(source) == ["line 21: %globaltimer in a string"]
    extra = ("import triton.language as tl\n"
             "from triton.language.extra.cuda import globaltimer\n"
             "def k():\n    t = tl.extra.cuda.globaltimer()\n")
    assert clock_reads.source_reads(extra) == [
        "line 2: globaltimer from triton.language.extra.cuda",
        "line 4: tl.extra.cuda.globaltimer"]
    assert clock_reads.source_reads("import time\nclock = time.monotonic\n") == []


def test_a_kernel_that_reads_the_globaltimer_is_refused():
    result = evaluate("softmax", (BAD / "globaltimer_asm.py").read_text(),
                      shapes=[(4, 128)], seeds=1, timeout_s=300)
    assert result.error_kind == "cheat_tamper", result.text
    assert "%globaltimer" in result.error_message, result.error_message


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_on_a_gpu_the_compiled_kernels_ptx_is_what_refuses_it():
    result = evaluate("softmax", (BAD / "globaltimer_asm.py").read_text(),
                      shapes=[(4, 128), (128, 4096)], seeds=1, timeout_s=300)
    assert result.error_kind == "cheat_tamper", result.text
    assert "%globaltimer in its" in result.error_message, result.error_message
    assert "kernel softmax_kernel" in result.error_message, result.error_message


def test_a_kernel_that_counts_launches_through_gridid_is_refused():
    """Red team 18's time bomb by launch count: ``%gridid`` in an inline asm string."""
    result = evaluate("rmsnorm", (BAD / "redteam18_rmsnorm_gridid_bomb.py").read_text(),
                      shapes=[(4, 128)], seeds=1, timeout_s=300)
    assert result.error_kind == "cheat_tamper", result.text
    assert "%gridid" in result.error_message, result.error_message
