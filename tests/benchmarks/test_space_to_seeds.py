"""A space point's verdict is the project's one rule (kernels/shared/comparison.py) on one
figure each, as the optimizer's spread fallback reads it."""

from __future__ import annotations

from benchmarks.space_to_seeds import NOISE, verdict


def test_a_space_points_verdict_is_the_shared_rule() -> None:
    ok = {"ok": True}
    assert verdict(ok, 1 + 2 * NOISE) == "improved"
    assert verdict(ok, 1 / (1 + 2 * NOISE)) == "regressed"
    assert verdict(ok, 1 + NOISE / 2) == "neutral"
    assert verdict(ok, None) == "neutral"
    assert verdict({"ok": False, "error_kind": "wrong_result", "stage": "correctness"},
                   None) == "incorrect"
    assert verdict({"ok": False, "error_kind": "cheat_replay", "stage": "correctness"},
                   None) == "incorrect"
    assert verdict({"ok": False, "error_kind": "compile_error", "stage": "compile"},
                   None) == "failed"
