"""A run over two regimes on the CPU interpreter: each regime tuned with its share of the
rounds, records tagged with their regime, report.md per regime, and the exported op with
the run's dispatch table, checked against the reference on a shape of each regime."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kernelkb.optimizer.agents.offline import OfflineAgent
from kernelkb.optimizer.loop import LoopOptions
from kernelkb.optimizer.policy import PolicyConfig
from kernelkb.optimizer.session import optimize, regime_plan, split_policy

SHAPES = [(2, 64), (1, 2100)]  # short_rows and medium_rows of softmax


@pytest.mark.slow
def test_each_regime_is_tuned_reported_and_dispatched(tmp_path: Path) -> None:
    agents: list[OfflineAgent] = []

    def fresh() -> OfflineAgent:
        agents.append(OfflineAgent(epsilon=0.0))
        return agents[-1]

    result = optimize("softmax", fresh(), out_dir=tmp_path, knowledge=None,
                      policy=PolicyConfig(max_iters=2),
                      options=LoopOptions(shapes=SHAPES, sweep_shapes=SHAPES, seeds=1,
                                          timeout_s=120, retrieval=False),
                      agent_factory=fresh)
    assert list(result.by_regime) == ["short_rows", "medium_rows"] and not result.untuned
    assert len(agents) == 2  # a fresh agent for the second regime
    rounds = {r: len(sub.rounds) - 1 for r, sub in result.by_regime.items()}
    assert rounds == {"short_rows": 1, "medium_rows": 1}  # 2 rounds split over 2 regimes
    assert {(rec.task.regime, rec.task.shape_set) for rec in result.records} == {
        ("short_rows", "rows=2,cols=64"), ("medium_rows", "rows=1,cols=2100")}
    report = result.report_path.read_text()
    assert "## Per regime" in report and "# Regime short_rows" in report
    assert "# Regime medium_rows" in report and "best_so_far_medium_rows.png" in report
    table = json.loads(result.table_path.read_text())
    entries = table["gpus"]["cpu-interpreter"]["regimes"]
    assert set(entries) == {"short_rows", "medium_rows"}
    assert all(not e["timed"] and e["time_ms"] is None for e in entries.values())  # CPU
    probe = ("import torch, best_softmax as m\n"
             "for shape in [(2, 64), (1, 2100), (1, 20000)]:\n"
             "    x = torch.randn(*shape, dtype=torch.float16)\n"  # the dtype it was checked in
             "    ref = torch.softmax(x.float(), -1)\n"
             "    assert (m.dispatch_run(x).float() - ref).abs().max() < 1e-3\n"
             "print(sorted(v[1] for v in m.dispatcher.choices.values()))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=result.export_path.parent,
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == str(["medium_rows", "medium_rows", "short_rows"])


def test_the_plan_and_the_budget_split() -> None:
    from kernelkb.kernels.discovery import get_task

    task = get_task("matmul")
    options = LoopOptions(shapes="auto", sweep_shapes="sweep")
    gpu, _ = regime_plan(task, options, on_gpu=True)
    assert list(gpu) == ["skinny", "medium", "large"]  # every regime of the sweep
    assert gpu["medium"][0] == [(1024, 4096, 4096), (1024, 11008, 4096)]  # its sweep
    softmax = get_task("softmax")
    rounds, sweep = regime_plan(softmax, options, on_gpu=True)[0]["long_rows"]
    assert set(sweep) <= set(rounds) and (1024, 128256) in rounds  # what it is judged by
    assert (2, 70000) in rounds  # and its edge shape
    only, skipped = regime_plan(softmax, replace(options, regimes=("long_rows",)), on_gpu=True)
    assert list(only) == ["long_rows"] and set(skipped) == {"short_rows", "medium_rows"}
    cpu, untuned = regime_plan(task, options, on_gpu=False)
    assert "medium" in untuned and "medium" not in cpu  # no interpreter-sized shape
    policy = PolicyConfig(max_iters=10, budget_s=90.0)
    first = split_policy(policy, [], 3)
    assert (first.max_iters, first.budget_s) == (4, 30.0)
