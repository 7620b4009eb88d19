"""Addresses from a 32-bit product of two run-time values (narrow_addresses.py), refused
from the kernel's TTIR: every round-15 plant on whichever path it takes, while each
shipped template, on every regime's path, stays clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.optimizer.sandbox import narrow_addresses
from kernelkb.optimizer.sandbox.evaluator import evaluate

BAD = Path(__file__).parents[2] / "bad_kernels"

# a kernel's TTIR as Triton prints it, cut to the ops the rule reads
TTIR = """
module {
  tt.func public @k(%x_ptr: !tt.ptr<f16>, %stride: i32, %n: i32) {
    %c128_i32 = arith.constant 128 : i32 loc(#loc2)
    %row = tt.get_program_id x : i32 loc(#loc2)
    %offs = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32> loc(#loc3)
    %blk = arith.muli %row, %c128_i32 : i32 loc(#loc3)
    %a = arith.muli %row, %stride : i32 loc(#loc4)
    %b = arith.extsi %a : i32 to i64 loc(#loc4)
    %p = tt.addptr %x_ptr, %b : !tt.ptr<f16>, i64 loc(#loc4)
    %q = tt.addptr %x_ptr, %blk : !tt.ptr<f16>, i32 loc(#loc3)
    %wide = arith.extsi %row : i32 to i64 loc(#loc5)
    %s64 = arith.extsi %stride : i32 to i64 loc(#loc5)
    %c = arith.muli %wide, %s64 : i64 loc(#loc5)
    %r = tt.addptr %x_ptr, %c : !tt.ptr<f16>, i64 loc(#loc5)
    %m = arith.muli %row, %n : i32 loc(#loc6)
    %ok = arith.cmpi slt, %m, %n : i32 loc(#loc6)
    %t = tt.load %x_ptr : !tt.ptr<i32> loc(#loc7)
    %e = tt.addptr %x_ptr, %t : !tt.ptr<f16>, i32 loc(#loc2)
    %t2 = arith.addi %t, %t : i32 loc(#loc7)
    %u = tt.addptr %x_ptr, %t2 : !tt.ptr<f16>, i32 loc(#loc7)
    %f:2 = scf.for %r = %c0 to %n step %c1 iter_args(%o = %z, %w = %wide) -> (i32, i64) : i32 {
      %v = tt.addptr %x_ptr, %w : !tt.ptr<f16>, i64 loc(#loc8)
      %o_2 = tt.addptr %x_ptr, %o : !tt.ptr<f16>, i32 loc(#loc8)
      %o_3 = arith.addi %o, %stride : i32 loc(#loc8)
      scf.yield %o_3, %w : i32, i64 loc(#loc8)
    } loc(#loc8)
    tt.return loc(#loc2)
  } loc(#loc2)
} loc(#loc2)
#loc2 = loc("/tmp/candidate.py":3:1)
#loc3 = loc("/tmp/candidate.py":5:10)
#loc4 = loc("/tmp/candidate.py":7:10)
#loc5 = loc("/tmp/candidate.py":9:10)
#loc6 = loc("/tmp/candidate.py":11:10)
#loc7 = loc("/tmp/candidate.py":13:10)
#loc8 = loc("/tmp/candidate.py":15:10)
"""


def test_a_32_bit_product_feeding_an_address_must_have_a_proved_bound() -> None:
    # line 7: row * stride in 32 bits, widened after the wrap: found. Line 5: the x
    # program id times a constant, nothing bounds it: found. Line 9: widened first. Line
    # 11: a 32-bit product used as a bound. Line 13: 32-bit arithmetic on a loaded value
    # (the value itself is an exact offset); the loop: a 32-bit offset carried round it
    # (stepped by a stride: the same product), its 64-bit neighbour not
    assert narrow_addresses.findings(TTIR) == [
        "line 7 of candidate.py",
        "line 5 of candidate.py (a run-time value times a constant, in 32 bits)",
        "line 13 of candidate.py (32-bit arithmetic on a value loaded from memory)",
        "`o`, a 32-bit value carried round a loop"]
    assert narrow_addresses.source_files(TTIR) == ["/tmp/candidate.py"]
    assert "line 7 of candidate.py" not in narrow_addresses.findings(
        TTIR.replace(": i32 loc(#loc4)", ": i64 loc(#loc4)"))
    message = narrow_addresses.message("k", ["line 7 of candidate.py"])
    assert "32-bit product" in message and "line 7" in message


BOUNDS = """
    %c64 = arith.constant 64 : i32 loc(#loc2)
    %c8 = arith.constant 8 : i32 loc(#loc2)
    %c63 = arith.constant 63 : i32 loc(#loc2)
    %pid_y = tt.get_program_id y : i32 loc(#loc2)
    %offs = tt.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32> loc(#loc2)
    %y_blk = arith.muli %pid_y, %c64 : i32 loc(#loc3)
    %p1 = tt.addptr %x_ptr, %y_blk : !tt.ptr<f16>, i32 loc(#loc3)
    %sq = arith.muli %offs, %offs : tensor<64xi32> loc(#loc4)
    %p2 = tt.addptr %x_ptr, %sq : !tt.ptr<f16>, i32 loc(#loc4)
    %up = arith.addi %n, %c63 : i32 loc(#loc5)
    %tiles = arith.divsi %up, %c64 : i32 loc(#loc5)
    %group = arith.muli %tiles, %c8 : i32 loc(#loc5)
    %p3 = tt.addptr %x_ptr, %group : !tt.ptr<f16>, i32 loc(#loc5)
    %big = arith.muli %tiles, %tiles : i32 loc(#loc6)
    %p4 = tt.addptr %x_ptr, %big : !tt.ptr<f16>, i32 loc(#loc6)
    %shift = arith.shli %n, %c8 : i32 loc(#loc7)
    %p5 = tt.addptr %x_ptr, %shift : !tt.ptr<f16>, i32 loc(#loc7)
    %cut = arith.remsi %n, %c64 : i32 loc(#loc8)
    %mod = arith.muli %cut, %c63 : i32 loc(#loc8)
    %p6 = tt.addptr %x_ptr, %mod : !tt.ptr<f16>, i32 loc(#loc8)
"""


def test_bounds_are_proved_from_constants_ranges_and_32_bit_widths() -> None:
    # line 5: the y program id (under 65,536) times 64; line 7: an arange squared; line
    # 9: a tile count (a 32-bit value over 64) times 8; line 15: a remainder under 64
    # times 63: all proved under 2**31. Line 11: two tile counts multiplied may pass it;
    # line 13: a run-time value shifted by a constant
    ttir = TTIR.replace("    tt.return loc(#loc2)", BOUNDS + "    tt.return loc(#loc2)")
    found = narrow_addresses.findings(ttir)[4:]
    assert found == [
        "line 11 of candidate.py (a 32-bit product whose factors' bounds pass 2**31)",
        "line 13 of candidate.py (a run-time value times a constant, in 32 bits)"], found


FOLDS = """
    %c1 = arith.constant 1 : i32 loc(#loc2)
    %w:2 = scf.while (%w_i = %c0, %w_off = %c0) : (i32, i32) -> (i32, i32) {
      scf.condition(%ok) %w_i, %w_off : i32, i32 loc(#loc2)
    } do {
    ^bb0(%w_i_1: i32 loc("w_i"(#loc2)), %w_off_1: i32 loc("w_off"(#loc2))):
      %w_p = tt.addptr %x_ptr, %w_off_1 : !tt.ptr<f16>, i32 loc(#loc3)
      scf.yield %w_i_1, %w_off_1 : i32, i32 loc(#loc3)
    } loc(#loc3)
    %rows = tt.splat %stride : i32 -> tensor<8xi32> loc(#loc4)
    %sums = "tt.scan"(%rows) <{axis = 0 : i32, reverse = false}> ({
    ^bb0(%a: i32 loc(#loc4), %b: i32 loc(#loc4)):
      %ab = arith.addi %a, %b : i32 loc(#loc4)
      tt.scan.return %ab : i32 loc(#loc4)
    }) : (tensor<8xi32>) -> tensor<8xi32> loc(#loc4)
    %p_s = tt.addptr %x_ptr, %sums : !tt.ptr<f16>, tensor<8xi32> loc(#loc4)
    %claim = tt.atomic_rmw add, acq_rel, gpu, %c_ptr, %c64 : (!tt.ptr<i32>, i32) -> i32 loc(#loc5)
    %at = arith.addi %claim, %c64 : i32 loc(#loc5)
    %p_a = tt.addptr %x_ptr, %at : !tt.ptr<f16>, i32 loc(#loc5)
    %twice = arith.addi %stride, %stride : i32 loc(#loc6)
    %p_t = tt.addptr %x_ptr, %twice : !tt.ptr<f16>, i32 loc(#loc6)
    %last = arith.subi %n, %c1 : i32 loc(#loc7)
    %p_l = tt.addptr %x_ptr, %last : !tt.ptr<f16>, i32 loc(#loc7)
"""


def test_values_folded_carried_claimed_or_summed_wide_are_read_as_wrapped() -> None:
    # a while loop's 32-bit carried value, a prefix sum of a stride (line 7), an atomic's
    # old value plus a block (line 9), a stride added to itself (line 11); one less than
    # a size (line 13) is not
    ttir = TTIR.replace("    tt.return loc(#loc2)", BOUNDS.replace("#loc", "#xloc") + FOLDS
                        + "    tt.return loc(#loc2)")
    found = narrow_addresses.findings(ttir)[6:]
    assert found == [
        "`w_off`, a 32-bit value carried round a loop",
        "line 7 of candidate.py (a 32-bit prefix sum or total over a block)",
        "line 9 of candidate.py (32-bit arithmetic on a value loaded from memory)",
        "line 11 of candidate.py (a 32-bit sum of two values each up to 2**31)"], found


# Each launch's TTIR made by Triton's frontend; the kernels themselves not run (only
# their arguments' types matter), so the scan takes seconds where running them takes
# minutes. Printed: {kernel: findings} for every launch the call made.
SCAN = textwrap.dedent("""
    import importlib.util, json, os, sys
    import torch
    from triton.runtime.interpreter import InterpretedFunction
    from kernelkb.kernels.discovery import get_task
    from kernelkb.optimizer.sandbox import narrow_addresses
    found = {}
    def launch(self, *args, **kwargs):
        kept = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
        result = narrow_addresses.launch_findings(self, args, kept)
        found.setdefault(self.fn.__name__, set()).update(
            ["no TTIR"] if result is None else result)
    InterpretedFunction.run = launch
    path, task_name = sys.argv[1], sys.argv[2]
    shapes = json.loads(sys.argv[3])
    task = get_task(task_name)
    spec = importlib.util.spec_from_file_location("scanned", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for shape in shapes:
        for dtype in (torch.float16, torch.float32):
            inputs = task.make_inputs(tuple(shape), dtype, 0, "cpu")
            extra = [a.default for a in getattr(task, "scalar_args", ()) or ()]
            try:
                module.run(*inputs, *extra)
            except Exception:  # noqa: BLE001 - kernels not run: what follows may fail
                pass
    print(json.dumps({k: sorted(v) for k, v in found.items()}))
""")


def _scan(path: Path, task_name: str, shapes: list) -> dict[str, list[str]]:
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", SCAN, str(path), task_name,
                           json.dumps([list(s) for s in shapes])],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _shapes(task_name: str) -> list:
    task = get_task(task_name)
    return list(task.cpu_shapes) + list(task.edge_shapes)


# every round-15 plant (and round 14's offsets plants), each on the path it takes at CPU
# sizes: the far-rows lap found one of the seven; this rule reads them all
PLANTS = {
    "redteam15_softmax_few_rows_int32": "softmax",
    "redteam15_softmax_long_rows_numel": "softmax",
    "redteam15_softmax_output_halves": "softmax",
    "redteam15_softmax_rows_tile_relative": "softmax",
    "redteam15_attention_seq_major_cache": "attention",
    "redteam15_matmul_transposed_weight_cols": "matmul",
    "redteam15_rope_heads_int32": "rope",
    "redteam14_matmul_int32_a_offsets": "matmul",
    "redteam14_softmax_two_launches": "softmax",
    "redteam14_swiglu_numel_int64": "swiglu",
    "redteam14_rope_int32_k_offsets": "rope",
    "narrow_offsets_softmax": "softmax",
    # round 16: an offset stepped by adding round a loop holds the same 32-bit product
    "redteam16_softmax_decode_carried": "softmax",
    "redteam16_attention_carried_block_base": "attention",
    # and a product with a constant (a specialised size, a block) of a value nothing bounds
    "redteam16_matmul_constexpr_k": "matmul",
    "redteam16_matmul_nt_constexpr_k": "matmul",
    "redteam16_rope_k_constexpr_row": "rope",
    "redteam16_swiglu_flat_halves": "swiglu",
    # round 17: products built without a multiply (a while loop, a prefix sum, unrolled
    # additions, an atomic work cursor)
    "redteam17_matmul_while_weight_base": "matmul",
    "redteam17_rmsnorm_tile_rows_cumsum": "rmsnorm",
    "redteam17_softmax_rows_unrolled": "softmax",
    "redteam17_swiglu_atomic_cursor": "swiglu",
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_each_plant_with_32_bit_offsets_is_found_on_its_own_path(plant: str) -> None:
    task_name = PLANTS[plant]
    shapes = _shapes(task_name)
    if plant.endswith("long_rows_numel"):
        shapes.append((2, 40000))  # its long-row path: 32,768 columns and more
    found = _scan(BAD / f"{plant}.py", task_name, shapes)
    lines = [f for fs in found.values() for f in fs if f != "no TTIR"]
    assert lines, found
    assert all(f"of {plant}.py" in f or "carried round a loop" in f for f in lines), found
    if plant.startswith("redteam16_") and "carried" not in plant:  # a constant's product
        assert any("a run-time value times a constant" in f for f in lines), found


@pytest.mark.slow
@pytest.mark.parametrize("task_name", sorted(all_tasks()))
def test_every_template_is_64_bit_clean_where_it_meets_a_stride(task_name: str, tmp_path
                                                                 ) -> None:
    """The default point and points across the space (their variants and paths)."""
    task = get_task(task_name)
    space = list(task.space())
    configs = [task.default_config] + space[:: max(1, len(space) // 6)]
    for i, config in enumerate(configs):
        path = tmp_path / f"point_{i}.py"
        path.write_text(task.render(config))
        found = _scan(path, task_name, _shapes(task_name)[:6])
        assert found, f"{task_name}: no launch seen"
        assert not any(found.values()), (config, found)


@pytest.mark.slow
def test_the_judge_refuses_the_plant_at_compile_and_passes_the_honest_kernel() -> None:
    few_rows = (BAD / "redteam15_softmax_few_rows_int32.py").read_text()
    refused = evaluate("softmax", few_rows, shapes=[(2, 100), (5, 64)], seeds=1,
                       narrow_addresses=True)
    assert not refused.ok and refused.stage == "compile", refused.error_message
    assert refused.error_kind == "compile_error"
    assert "32-bit product" in (refused.error_message or "")
    assert "redteam15_softmax_few_rows_int32" not in (refused.error_message or "")
    honest = get_task("softmax").render(get_task("softmax").default_config)
    passed = evaluate("softmax", honest, shapes=[(2, 100), (5, 64)], seeds=1,
                      narrow_addresses=True)
    assert passed.ok, passed.error_message
