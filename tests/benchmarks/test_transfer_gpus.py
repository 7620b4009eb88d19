"""benchmarks/transfer_gpus.py end to end on tiny generated data (both studies, fast).

The files are made here in the formats the benchmark reads: Kernel Tuner cache files
(gzip JSON, a failed configuration's time a string, one GPU named only by its file) and
the project's measured-space files for three tasks. Times follow the launch (threads per
program) plus seeded noise, so there is something to learn, but nothing is asserted about
who wins: only that every case and method is reported and nothing leaks.
"""

from __future__ import annotations

import gzip
import json
import math
import random
from pathlib import Path

from benchmarks import transfer_gpus
from kernelkb.kernels.discovery import get_task

GPUS = {"A100.json.gz": "NVIDIA A100-PCIE-40GB", "A6000.json.gz": "NVIDIA RTX A6000",
        "MI250X.json.gz": ""}


def write_kernel_tuner(folder: Path) -> None:
    folder.mkdir(parents=True)
    rng = random.Random(0)
    for file, device in GPUS.items():
        cache = {}
        for bx in (16, 32, 64, 128, 256):
            for tx in (1, 2, 4):
                for flag in (0, 1):
                    t = 1 + abs(math.log2(bx) - 6) * 0.3 + 0.1 * tx + 0.05 * flag
                    entry = {"block_size_x": bx, "tile_size_x": tx, "use_shmem": flag,
                             "time": t * (1 + 0.05 * rng.random())}
                    if device == "NVIDIA RTX A6000" and bx == 256 and tx == 4:
                        entry["time"] = "CompilationFailedConfig"
                    cache[f"{bx},{tx},{flag}"] = entry
        data = {"device_name": device, "kernel_name": "toy_kernel", "problem_size": [4096],
                "tune_params_keys": ["block_size_x", "tile_size_x", "use_shmem"],
                "objective": "time", "cache": cache}
        (folder / file).write_bytes(gzip.compress(json.dumps(data).encode()))


def write_spaces(folder: Path) -> None:
    folder.mkdir(parents=True)
    rng = random.Random(1)
    env = {"gpu_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132, "smem_per_sm_kib": 228,
           "mem_bandwidth_gbps": 4800.0, "peak_tflops": 989.0, "triton_version": "3.6.0",
           "torch_version": "2", "cuda_version": "13"}
    for name in ("softmax", "swiglu", "rope"):
        task = get_task(name)
        shapes = task.sweep_shapes[:2]
        labels = [task.shape_label(s) for s in shapes]
        configs = []
        for i, config in enumerate(task.space()):
            times = {}
            for shape, label in zip(shapes, labels, strict=True):
                launch = task.launch(config, shape)
                t = (1 + abs(math.log2(launch.threads_per_program) - 7) * 0.2) * (
                    1 + 0.03 * rng.random())
                times[label] = [t, 0.01]
            ok = i != 3  # one failure per task
            row = {"config": config, "ok": ok}
            if ok:
                row["times_ms"] = times
                row["time_ms"] = math.exp(sum(math.log(v[0]) for v in times.values()) / 2)
            configs.append(row)
        data = {"task": name, "dtype": "float16", "shapes": labels,
                "default": ",".join(f"{k}={v}" for k, v in sorted(task.default_config.items())),
                "env": env, "baseline_ms": {}, "configs": configs,
                "space_size": len(configs), "complete": True}
        (folder / f"{name}_float16.json").write_text(json.dumps(data))


def test_benchmark_end_to_end_on_tiny_files(tmp_path: Path) -> None:
    write_kernel_tuner(tmp_path / "hub" / "toy")
    write_spaces(tmp_path / "spaces")
    out = tmp_path / "out"
    code = transfer_gpus.main(["--data", str(tmp_path / "hub"), "--spaces",
                               str(tmp_path / "spaces"), "--out", str(out), "--trees", "20",
                               "--task-train", "spaces", "--model-seeds", "2"])
    assert code == 0
    payload = json.loads((out / "transfer_gpus.json").read_text())
    gpu_cases = [c for c in payload["cases"] if c["kind"] == "gpu"]
    task_cases = [c for c in payload["cases"] if c["kind"] == "task"]
    assert {c["gpu"] for c in gpu_cases} == {"NVIDIA A100-PCIE-40GB", "NVIDIA RTX A6000",
                                             "AMD Instinct MI250X"}
    assert {c["op"] for c in task_cases} == {"softmax", "swiglu", "rope"}
    for case in gpu_cases:  # no leakage: the held-out GPU never trained the model
        assert case["gpu"] not in case["_train_gpus"] and len(case["_train_gpus"]) == 2
        assert case["cold"]["runs"] == 20 and case["ranker"]["runs"] == 2
        assert case["rgpe"]["runs"] == 2  # the transfer-BO peer, once per model seed
        # every method but the unseen-task walk's earlier version, run on task cases only
        assert set(transfer_gpus.METHODS) - set(case) == {"ranker_before"}
        for method in (m for m in transfer_gpus.METHODS if m in case):
            e3 = case[method]["e3"]["median"]
            assert 1 <= e3 <= case["configs"], (method, e3)
            assert case[method]["first"]["median"] >= 1.0
            at = [case[method]["at"][n]["median"] for n in ("1", "5", "10", "20")]
            assert at == sorted(at, reverse=True) and at[-1] >= 1.0
    for case in task_cases:
        assert case["op"] not in case["_train_ops"]
        assert "most_similar_gpu" not in case and case["cold"]["runs"] == 20
    text = (out / "transfer_gpus.md").read_text()
    assert "Leave-one-GPU-out" in text and "Leave-one-task-out" in text and "E@3%" in text
    # the development split (the toy kernel; no test kernel here), E@3%, first proposal,
    # tasks, the unseen-task walk against cold, interval coverage
    assert len(payload["goals"]) == 6
    assert payload["goals"][0].startswith("- **Development split** (toy; 3 cases)")
    assert "Goal walk <= 0.5x cold" in payload["goals"][4]
    assert "of the first 10 of each ranking; goal 70-90%" in payload["goals"][5]
    for case in gpu_cases:  # two training GPUs: nothing to hold out, the model's order
        assert case["_orders"] == ["model"]
    # the seed table: a row per split and method, the walk against the best peer
    summary = payload["seed_summary"]["all"]
    assert set(summary["methods"]) >= {"rgpe", "ranker", "mean_rank", "cold"}
    assert all(len(v["median"]) == 2 for v in summary["methods"].values())
    assert len(summary["vs_best_peer"]["median"]) == 2
    assert "## Over model seeds" in text and "first 10 of the product's list" in text
    assert (out / "transfer_gpus.png").stat().st_size > 10_000
