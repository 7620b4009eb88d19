"""The transfer benchmark's replay on a tiny SYNTHETIC space (test data, not measurements).

The space is softmax's real grid with made-up times whose best config is known by
construction, plus the three holes a partial GPU measurement leaves: correct-but-untimed
rows, a failed row and an absent row. The tests check that the replay answers with real
EvalResults, that unmeasured proposals are counted and never scored as fast, and that the
metrics of the report are what the traces say.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks.replay.evaluator import ReplayEvaluator
from benchmarks.replay.knowledge import arm_records
from benchmarks.replay.metrics import evaluations_to, summarize
from benchmarks.replay.runs import replay_run
from benchmarks.replay.space import config_key, load_space
from benchmarks.transfer import run_benchmark
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.shared.stats import geomean

TASK = get_task("softmax")
WARPS = {1: 1.6, 2: 1.3, 4: 1.0, 8: 0.8, 16: 0.9}
ROWS = {1: 1.0, 2: 0.9, 4: 0.95}
BLOCK = {0: 1.0, 1024: 1.2, 4096: 1.1}
# whole configurations (the task's default for any knob not named), as the space holds them
ABSENT = {**TASK.default_config, "BLOCK_SIZE": 4096, "NUM_STAGES": 2, "NUM_WARPS": 16,
          "ONLINE": True, "ROWS_PER_PROGRAM": 1}
FAILED = {**TASK.default_config, "BLOCK_SIZE": 0, "NUM_STAGES": 1, "NUM_WARPS": 16,
          "ONLINE": False, "ROWS_PER_PROGRAM": 4}


def factor(cfg: dict) -> float:
    return WARPS[cfg["NUM_WARPS"]] * ROWS[cfg["ROWS_PER_PROGRAM"]] * BLOCK[cfg["BLOCK_SIZE"]] \
        * (0.97 if cfg["ONLINE"] else 1.0)


def write_space(folder: Path) -> Path:
    """Synthetic space: NUM_WARPS=2 rows correct but untimed, one failed, one absent."""
    labels = [TASK.shape_label(s) for s in TASK.shapes("representative")]
    bases = [0.02, 0.2, 1.0]
    rows = []
    for cfg in TASK.space():
        if cfg == ABSENT:
            continue
        row = {"key": config_key(cfg), "config": cfg, "ok": True, "stage": "correctness",
               "error_kind": None, "failing_shapes": [], "max_rel_err": 1e-3}
        if cfg == FAILED:
            row.update(ok=False, stage="run", error_kind="timeout", error_message="killed")
        elif cfg["NUM_WARPS"] != 2:
            times = {lab: [b * factor(cfg), 0.001 * b] for lab, b in zip(labels, bases,
                                                                         strict=True)}
            row.update(times_ms=times, time_ms=geomean([t[0] for t in times.values()]),
                       resources={"registers": 32, "spills": 0, "smem_bytes": 0})
        rows.append(row)
    data = {"task": "softmax", "op_type": "softmax", "dtype": "float16", "shapes": labels,
            "default": config_key(TASK.default_config),
            "env": {"gpu_name": "SYNTHETIC TEST GPU", "arch": "sm_90", "sm_count": 132,
                    "mem_bandwidth_gbps": 4000.0, "smem_per_sm_kib": 228,
                    "peak_tflops": 600.0, "triton_version": "3.6.0",
                    "torch_version": "2.11.0", "cuda_version": "13.0"},
            "peaks": {"mem_bandwidth_gbps": 4000.0, "peak_tflops": 600.0},
            "baseline_ms": {lab: [b * 1.2, 0.001] for lab, b in zip(labels, bases,
                                                                    strict=True)},
            "command": "synthetic test data", "date": "2000-01-01T00:00:00+00:00",
            "space_size": len(list(TASK.space())), "complete": False, "configs": rows}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "softmax_float16.json"
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def space(tmp_path: Path):
    return load_space(write_space(tmp_path / "space"))


def expected_best() -> tuple[str, float]:
    timed = {config_key(c): factor(c) * geomean([0.02, 0.2, 1.0]) for c in TASK.space()
             if c != ABSENT and c != FAILED and c["NUM_WARPS"] != 2}
    key = min(timed, key=timed.__getitem__)
    return key, timed[key]


def test_space_knows_its_best_and_its_holes(space) -> None:
    key, best = expected_best()
    assert space.best_key == key and math.isclose(space.best_ms, best)
    counts = space.counts()
    grid = len(list(TASK.space()))
    assert counts == {"grid": grid, "timed": counts["timed"], "failed": 1,
                      "untimed": counts["untimed"], "absent": 1}
    assert counts["timed"] + counts["untimed"] == grid - 2 and counts["untimed"] > 0


def test_replay_answers_with_real_results_and_flags_unmeasured(space) -> None:
    replay = ReplayEvaluator(space)
    default = TASK.render(TASK.default_config)
    start = replay("softmax", default, baseline=replay.baseline())
    assert start.ok and start.stage == "performance" and start.timing_available
    assert math.isclose(start.time_ms, geomean([0.02, 0.2, 1.0]))
    assert math.isclose(start.speedup_vs_baseline, 1.2)
    faster = replay("softmax", TASK.render({**TASK.default_config, "NUM_WARPS": 8}),
                    parent=start)
    assert math.isclose(faster.speedup_vs_parent, 1 / 0.8)
    assert "0.80" not in faster.text and "1.25x" in faster.text  # the loop's own renderer

    untimed = replay("softmax", TASK.render({**TASK.default_config, "NUM_WARPS": 2}))
    assert untimed.ok and not untimed.timing_available and untimed.time_ms is None
    absent = replay("softmax", TASK.render(ABSENT))
    assert not absent.ok and absent.error_kind == "unmeasured"
    edited = replay("softmax", default.replace("tl.exp(", "tl.exp2("))  # same header
    assert not edited.ok and edited.error_kind == "unmeasured"
    failed = replay("softmax", TASK.render(FAILED))
    assert not failed.ok and failed.error_kind == "timeout"
    assert [c.status for c in replay.calls] == ["timed", "timed", "untimed", "absent",
                                                "absent", "failed"]


def test_metrics_count_evaluations_and_censor_misses(space) -> None:
    trace = replay_run(space, "cold", seed=0, budget=12)
    calls = trace.calls
    assert 2 <= len(calls) <= 12 and calls[0].key == space.default_key
    times = [c.time_ms for c in calls]
    target = space.best_ms / 0.95
    first = next((i for i, t in enumerate(times, 1) if t is not None and t <= target), None)
    assert trace.metrics.to_95 == first == evaluations_to(calls, target)
    assert trace.metrics.unmeasured == sum(c.status in ("untimed", "absent") for c in calls)
    assert trace.metrics.final_speedup >= 1.0
    stats = summarize([3, None, 5])
    assert stats["median"] == 5 and math.isinf(stats["max"]) and stats["reached"] == 2


def test_benchmark_end_to_end_writes_table_plot_and_notes(tmp_path: Path) -> None:
    write_space(tmp_path / "space")
    (tmp_path / "seeds").mkdir()
    out = tmp_path / "results"
    payload = run_benchmark(space_dir=tmp_path / "space", seeds_dir=tmp_path / "seeds",
                            out_dir=out, repeats=2, budget=10, arms=("cold",))
    entry = payload["tasks"]["softmax"]
    assert entry["brute_force"]["best_key"] == expected_best()[0]
    runs = entry["runs"]["cold"]
    assert [r["seed"] for r in runs] == [0, 1]
    best = entry["brute_force"]["best_ms"]
    for run in runs:  # the stored metric agrees with the stored trace
        times = [t for _, _, t in run["trace"]]
        hit = next((i for i, t in enumerate(times, 1) if t and t <= best / 0.95), None)
        assert run["to_95"] == hit
    assert entry["arms"]["cold"]["unmeasured"] == sum(
        s in ("untimed", "absent") for r in runs for _, s, _ in r["trace"])
    assert any("rmsnorm: skipped, no space file" in n for n in payload["notes"])
    md = (out / "transfer.md").read_text()
    assert "| softmax | cold (retrieval off) |" in md and "PARTIAL" in md
    assert (out / "transfer.png").stat().st_size > 1000
    assert json.loads((out / "transfer.json").read_text())["config"]["repeats"] == 2


def test_transfer_arm_never_holds_the_held_out_task(space) -> None:
    from benchmarks.replay.knowledge import space_records

    own = space_records(space)
    assert own and all(r.task.task_id == "softmax" for r in own)
    assert arm_records("transfer", "softmax", [space], []) == []
    assert {r.id for r in arm_records("same_task_prior", "softmax", [space], [])} == \
        {r.id for r in own}
    with pytest.raises(ValueError, match="unknown arm"):
        arm_records("oracle", "softmax", [space], [])


def write_plain_space(folder: Path, name: str) -> None:
    """Synthetic, fully timed space of another task: later knob values are faster."""
    task = get_task(name)
    labels = [task.shape_label(s) for s in task.shapes("representative")]
    params = (*task.variants, *task.knobs)
    rows = []
    for cfg in task.space():
        f = math.prod(1.0 - 0.03 * p.values.index(cfg[p.name]) for p in params)
        times = {lab: [0.1 * f, 0.0001] for lab in labels}
        rows.append({"key": config_key(cfg), "config": cfg, "ok": True,
                     "stage": "correctness", "error_kind": None, "failing_shapes": [],
                     "times_ms": times, "time_ms": 0.1 * f})
    source = json.loads((folder / "softmax_float16.json").read_text())
    data = {**source, "task": name, "op_type": task.op_type, "shapes": labels,
            "default": config_key(task.default_config), "complete": True,
            "baseline_ms": {lab: [0.12, 0.001] for lab in labels},
            "space_size": len(rows), "configs": rows}
    (folder / f"{name}_float16.json").write_text(json.dumps(data))


@pytest.mark.slow
def test_transfer_arm_retrieves_only_the_other_task(tmp_path: Path) -> None:
    """Real stores and the real embedding model: the held-out run recalls the other task."""
    write_space(tmp_path / "space")
    write_plain_space(tmp_path / "space", "rmsnorm")
    (tmp_path / "seeds").mkdir()
    payload = run_benchmark(space_dir=tmp_path / "space", seeds_dir=tmp_path / "seeds",
                            out_dir=tmp_path / "results", repeats=1, budget=6,
                            tasks=["softmax"], arms=("cold", "transfer"))
    softmax = payload["tasks"]["softmax"]
    assert list(payload["tasks"]) == ["softmax"]  # rmsnorm is only the other task here
    assert softmax["store_sizes"]["transfer"] > 0
    assert softmax["arms"]["transfer"]["retrieved"]["max"] > 0  # recall reached the loop
    assert softmax["arms"]["cold"]["retrieved"]["max"] == 0
    assert not any("NO experiences" in n for n in softmax["notes"])
