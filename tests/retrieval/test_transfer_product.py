"""The product path (`kernelkb import` + `kernelkb bootstrap`) gives the benchmark's
figures: on Kernel Tuner caches of a kernel with its own parameter names (``nthreads``,
``items_per_thread``: read by those names, not refused), the list bootstrap prints for a
GPU the store never measured is the order benchmarks/transfer_gpus.py scores (the same
model, fit on the same rows), so its E@3% and first proposal are the benchmark's; with
the target's first measurement imported, the unmeasured places follow the walk."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from kernelkb.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]

from benchmarks.transfer_gpus import (  # noqa: E402
    load_kernel_tuner,
    make_case,
    walk_metrics,
    zero_shot_order,
)
from kernelkb.retrieval.ranker import CostModel, config_key  # noqa: E402
from kernelkb.retrieval.walk import replay  # noqa: E402

GPUS = {"NVIDIA RTX A4000": (48, 32), "NVIDIA RTX A6000": (84, 32),
        "NVIDIA A100-PCIE-40GB": (108, 32), "AMD Instinct MI250X": (220, 64),
        "AMD Radeon PRO W7800": (70, 64)}
TARGET = "AMD Radeon PRO W7800"
KEYS = ["nthreads", "items_per_thread", "use_shmem"]
PROBLEM = 1 << 22


def reduce_time(config: dict[str, int], sms: int, warp: int) -> float:
    """Best at 8 warps of the GPU's width and 4 items per thread; shared memory helps a
    little on wide warps; full waves help."""
    warps = config["nthreads"] / warp
    t = 1.0 + 0.2 * (math.log2(warps) - 3) ** 2 + 0.15 * abs(
        math.log2(config["items_per_thread"]) - 2)
    t *= 0.95 if config["use_shmem"] and warp == 64 else 1.0
    waves = PROBLEM / (config["nthreads"] * config["items_per_thread"]) / (sms * 4)
    return t * (1 + 0.2 * (1 - waves / math.ceil(waves))) + 0.001 * (sms % 7)


def cache(gpu: str, configs: list[dict[str, int]]) -> dict[str, Any]:
    sms, warp = GPUS[gpu]
    return {"device_name": gpu, "kernel_name": "reduce_kernel", "problem_size": [PROBLEM],
            "tune_params_keys": KEYS, "objective": "time",
            "cache": {",".join(str(c[k]) for k in KEYS): {
                **c, "time": reduce_time(c, sms, warp), "times": [reduce_time(c, sms, warp)]}
                for c in configs}}


CONFIGS = [{"nthreads": t, "items_per_thread": i, "use_shmem": s}
           for t in (32, 64, 128, 256, 512, 1024) for i in (1, 2, 4, 8) for s in (0, 1)]


def test_bootstrap_lists_the_benchmarks_order_and_walks_as_it_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data" / "reduce"
    data.mkdir(parents=True)
    for gpu in GPUS:
        (data / f"{gpu.split()[-1]}.json").write_text(json.dumps(cache(gpu, CONFIGS)))
    # the Python path: the benchmark's reading, case and model (seed 0)
    rows = load_kernel_tuner(tmp_path / "data")
    assert {r.op for r in rows} == {"reduce"} and len(rows) == len(GPUS) * len(CONFIGS)
    held = [r for r in rows if r.gpu == TARGET]
    assert {r.launch.threads_per_program for r in held} == {c["nthreads"] for c in CONFIGS}
    train = [r for r in rows if r.gpu != TARGET]
    case = make_case("reduce", "gpu", held)
    model = CostModel().fit(train)
    python_order = zero_shot_order(case, model)

    # the product path: an empty store, the four other GPUs' caches imported
    (tmp_path / "target").mkdir()
    (data / f"{TARGET.split()[-1]}.json").rename(tmp_path / "target" / "w7800.json")
    monkeypatch.setenv("KERNELKB_DATA_DIR", str(tmp_path / "store"))
    monkeypatch.setenv("KERNELKB_SEEDS_DIR", str(tmp_path / "none"))
    assert cli.main(["import", str(data)]) == 0
    assert f"total: {4 * len(CONFIGS)} accepted, 0 duplicate, 0 rejected" in \
        capsys.readouterr().out

    def listed() -> list[str]:
        assert cli.main(["bootstrap", "--op", "reduce", "--gpu", TARGET, "--json",
                         "--limit", str(len(CONFIGS))]) == 0
        plan = json.loads(capsys.readouterr().out)
        return [config_key(item["config"]) for item in plan["prediction"]["items"]]

    product_order = listed()
    assert product_order == python_order
    assert walk_metrics(product_order, case) == walk_metrics(python_order, case)

    # the target's measurement of the first proposal imported: the next proposals are
    # the walk's (walk.replay over the same model and rows)
    first = json.loads((tmp_path / "target" / "w7800.json").read_text())
    first["cache"] = {k: v for k, v in first["cache"].items()
                      if config_key({c: v[c] for c in KEYS}) == python_order[0]}
    (tmp_path / "target" / "w7800.json").write_text(json.dumps(first))
    assert cli.main(["import", str(tmp_path / "target")]) == 0
    capsys.readouterr()
    measured = [r for r in held if r.key == python_order[0]]
    walked = replay(CostModel().fit(train), case.rows, train, measured)
    after = listed()
    assert after[0] == python_order[0]  # measured, where the model puts it
    assert after[1:6] == walked[:5]
