"""benchmarks/eval_cost.py's table: one row per arm, its median, range and ratio to the
base, failed runs left out."""

from __future__ import annotations

from benchmarks.eval_cost import markdown


def test_the_table_gives_each_checkouts_median_range_and_their_ratio():
    ok = lambda s: {"wall_s": s, "ok": True}  # noqa: E731
    report = {"gpu": "NVIDIA H200", "base": "341ea0f", "commands": ["python a", "python b"],
              "rows": {"softmax": {"base": [ok(10.0), ok(12.0), ok(14.0)],
                                   "this": [ok(15.0), {"wall_s": None, "ok": False}, ok(16.0),
                                            ok(18.0)]}}}
    text = markdown(report)
    assert "this checkout vs 341ea0f" in text and "`python a` then `python b`" in text
    assert "| softmax | base | 12.00 s [10.00, 14.00] | 1.00x | 3 |" in text
    assert "| softmax | this | 16.00 s [15.00, 18.00] | 1.33x | 4 |" in text  # failed run out
