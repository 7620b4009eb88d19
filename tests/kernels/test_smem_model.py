"""The shared-memory model of each task against what Triton allocated on the H200.

``benchmarks/space/<task>_float16.json`` holds, for every point of each space, the shared
memory of the compiled kernels (or Triton's out-of-resources error) measured on the H200:
the model must never predict less than was used, must call every point that compiled
feasible on the H200 and every point that ran out of shared memory infeasible.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.kernels.resources import smem_limit

SPACES = Path(__file__).parents[2] / "benchmarks" / "space"
H200 = smem_limit("NVIDIA H200")


def _measured(task_name: str) -> tuple[dict, list[dict]]:
    data = json.loads((SPACES / f"{task_name}_float16.json").read_text())
    assert data["env"]["gpu_name"] == "NVIDIA H200"
    return data, data["configs"]


def test_the_h200_limit_is_227_kib() -> None:
    assert H200 == smem_limit("sm_90") == 227 * 1024
    assert smem_limit("NVIDIA A100-SXM4-80GB") == 163 * 1024
    assert smem_limit("cpu-interpreter") is None


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_the_model_covers_what_triton_allocated_on_the_h200(name: str) -> None:
    task = get_task(name)
    data, configs = _measured(name)
    shapes = tuple(next(s for s in task.shapes("all") if task.shape_label(s) == label)
                   for label in data["shapes"])
    for point in configs:
        need = task.smem_need(point["config"], shapes, ("float16",))
        used = (point.get("resources") or {}).get("smem_bytes")
        if used is not None:
            assert used <= need, (point["key"], used, need)
            assert task.infeasible(point["config"], H200, shapes, ("float16",)) is None
        if "out of resource: shared memory" in (point.get("error_message") or ""):
            assert task.infeasible(point["config"], H200, shapes, ("float16",)), point["key"]


def test_the_fused_attention_with_table_and_three_stages_is_marked_infeasible() -> None:
    task = get_task("attention")
    heavy = {**task.default_config, "BLOCK_M": 128, "BLOCK_N": 64, "NUM_WARPS": 8,
             "NUM_STAGES": 3, "FUSE_KV_WRITE": True, "ROPE_TABLE": True, "CAUSAL_SKIP": True}
    assert task.smem_bytes(heavy, (1, 2, 33, 63, 128), torch.float16) == 262144
    assert task.smem_need(heavy) == 262144 + 8 * 1024  # plus a warp's KiB of scratch
    assert "over the GPU's 227 KiB" in task.infeasible(heavy, H200)
    assert heavy not in list(task.space(H200)) and heavy in list(task.space())
    lighter = {**heavy, "NUM_STAGES": 2}
    assert task.infeasible(lighter, H200) is None and lighter in list(task.space(H200))


def test_a_smaller_gpu_loses_more_points() -> None:
    matmul = get_task("matmul")
    on_h200, on_a100 = list(matmul.space(H200)), list(matmul.space(smem_limit("sm_80")))
    assert len(on_a100) < len(on_h200) == len(list(matmul.space()))
