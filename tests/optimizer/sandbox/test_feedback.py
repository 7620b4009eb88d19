"""The agent text and the record mapping for a timed result (fields set by hand: the
figures themselves come from the H200 run, see test_gpu.py)."""

from __future__ import annotations

from kernelkb.kb.record import Feedback
from kernelkb.optimizer.sandbox import EvalResult
from kernelkb.optimizer.sandbox.feedback import bottleneck_hint, render
from kernelkb.optimizer.sandbox.timing import _too_good, floor_ms


def _timed() -> EvalResult:
    r = EvalResult(ok=True, stage="performance", task_name="softmax", dtype="float16",
                   shape_set="custom", shapes_checked=["rows=1,cols=128", "rows=4096,cols=4096"],
                   max_abs_err=1e-4, max_rel_err=1.2e-5, mean_abs_err=3e-7, bias=1e-7,
                   mismatch_share=0.0, timing_available=True,
                   timings={"rows=1,cols=128": (0.010, 0.001),
                            "rows=4096,cols=4096": (0.02, 0.001)},
                   time_ms=0.0141, baseline_ms=0.02, parent_ms=0.016, speedup_vs_baseline=1.42,
                   speedup_vs_parent=1.13, achieved_gbps=3600.0, peak_share=0.85, registers=64,
                   spills=0, smem_bytes=32768, regressions={"rows=1,cols=128": 0.09},
                   suspect=True, suspect_reasons=["(rows=1,cols=128) 12.0x faster than the parent"])
    r.bottleneck_hint = bottleneck_hint(r, compute_bound=False, num_warps=4, smem_per_sm_kib=228)
    r.text = render(r)
    return r


def test_render_has_every_layer():
    text = _timed().text
    assert "correctness: pass on 2 shapes" in text
    assert "baseline 0.02 ms" in text and "1.42x / 1.13x" in text
    assert "3.60 TB/s" in text and "85% of peak" in text
    assert "64 regs, 0 spills, 32 KiB smem" in text
    assert "memory-bound, near roofline" in text
    assert "slower than parent on (rows=1,cols=128) by 9%" in text
    assert "SUSPECT" in text
    assert len(text.splitlines()) <= 6


def test_timed_feedback_validates_and_keeps_shape_timings():
    fb = Feedback.model_validate(_timed().feedback_dict())
    assert fb.time_ms == 0.0141 and fb.suspect
    assert [t.shape for t in fb.timings] == ["rows=1,cols=128", "rows=4096,cols=4096"]


def test_hint_flags_spills_and_low_occupancy():
    r = _timed()
    r.peak_share, r.spills, r.registers = 0.3, 12, 255
    hint = bottleneck_hint(r, compute_bound=False, num_warps=8, smem_per_sm_kib=228)
    assert "far from the memory roofline" in hint and "12 register spills" in hint
    assert "occupancy" in hint


def test_too_good_rules():
    assert _too_good(0.01, parent_ms=0.2, floor_ms=None)  # 20x the parent
    assert not _too_good(0.05, parent_ms=0.2, floor_ms=None)
    floor = floor_ms(4_800_000_000, 0, {"mem_bandwidth_gbps": 4800.0, "peak_tflops": None})
    assert abs(floor - 1.0) < 1e-9  # 4.8 GB at 4.8 TB/s = 1 ms
    assert _too_good(0.9, parent_ms=None, floor_ms=floor)
    assert not _too_good(1.1, parent_ms=None, floor_ms=floor)
