"""A candidate that replaces what the harness relies on (its clock, its comparison, the
ops the checks run) is rejected: ``cheat_timer`` for the timing path, ``cheat_tamper``
for the rest. On the CPU the timing is labelled unavailable, but the check still runs
after the import and after every call (the GPU side is in test_gpu.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optimizer.sandbox import evaluate, tamper

BAD = Path(__file__).parents[2] / "bad_kernels"

CASES = [
    ("patch_do_bench", "cheat_timer", ("triton.testing.do_bench", "after the import")),
    ("patch_clock_in_run", "cheat_timer", ("time.perf_counter", "torch.cuda.synchronize",
                                           "after a call on (rows=1,cols=7)")),
    ("patch_checks", "cheat_tamper", ("optimizer.sandbox.checks.compare_outputs",)),
    ("open_mode", "cheat_tamper", ("mode stack",)),
]


@pytest.mark.parametrize(("name", "kind", "named"), CASES, ids=[c[0] for c in CASES])
def test_replacing_what_the_harness_uses_is_caught(name, kind, named):
    result = evaluate("softmax", (BAD / f"{name}.py").read_text(), shapes=[(1, 7)], seeds=1)
    assert not result.ok and result.error_kind == kind, result.text
    for text in named:
        assert text in result.error_message, result.error_message


def test_snapshot_sees_a_replaced_function_and_a_replaced_method():
    import time

    import torch

    snapshot = tamper.Snapshot()
    assert snapshot.changes() == []
    real_clock, real_abs = time.perf_counter, torch.Tensor.abs
    try:
        time.perf_counter = lambda: 0.0
        torch.Tensor.abs = lambda self: self
        where = {c.where for c in snapshot.changes()}
    finally:
        time.perf_counter, torch.Tensor.abs = real_clock, real_abs
    assert where == {"time.perf_counter", "torch.Tensor.abs"}
    assert tamper.describe([tamper.Change("time.perf_counter", True)])[0] == "cheat_timer"
    assert snapshot.changes() == []
