"""Task.launch against what each template really launches.

Every configuration of every task's space is rendered and run on the CPU with its Triton
kernels swapped for recorders: the grids run() computes are the truth that Launch.programs
must match (persistent grids through the cap, with the CPU's 4 programs counted as 1 SM).
"""

from __future__ import annotations

import math

import pytest
import torch
from triton.runtime.jit import KernelInterface

from kernelkb.kernels.base import generic_launch
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import all_tasks
from kernelkb.kernels.shared.launch import Launch

TASKS = all_tasks()


class _Recorder:
    """Stands in for a @triton.jit kernel: kernel[grid](...) records the grid size."""

    def __init__(self, launched: list[int]) -> None:
        self.launched = launched

    def __getitem__(self, grid):
        def call(*args, **kwargs):
            self.launched.append(math.prod(grid))
        return call


def _instrument(module) -> list[int]:
    """Swap the module's kernels for recorders; returns the list they append grids to."""
    launched: list[int] = []
    for name, value in vars(module).copy().items():
        if isinstance(value, KernelInterface):
            setattr(module, name, _Recorder(launched))
    return launched


def _launched_programs(module, launched: list[int], inputs) -> int:
    launched.clear()
    module.run(*inputs)
    return sum(launched)


def _effective(launch: Launch, sm_count: int) -> int:
    if launch.programs_per_sm_cap:
        return min(launch.programs, launch.programs_per_sm_cap * sm_count)
    return launch.programs


@pytest.mark.parametrize("name", sorted(TASKS))
def test_programs_match_the_templates_grid(name):
    task = TASKS[name]
    shapes = (*task.cpu_shapes, *task.edge_shapes)
    inputs = {s: task.make_inputs(s, torch.float16, 0, "cpu") for s in shapes}
    checked = 0
    for config in task.space():
        module = load_candidate(task.render(config), f"launch_{name}")
        launched = _instrument(module)
        for shape in shapes:
            launch = task.launch(config, shape)
            # the CPU path of a persistent grid launches 4 programs: one "SM" of 4 slots
            real = _launched_programs(module, launched, inputs[shape])
            assert _effective(launch, sm_count=1) == real, (name, config, shape, launch)
            checked += 1
    assert checked >= len(shapes) * 10


@pytest.mark.parametrize("name", sorted(TASKS))
def test_launch_work_covers_the_output(name):
    """programs x work per program is at least the output (more only by padding)."""
    task = TASKS[name]
    for config in task.space():
        for shape in task.sweep_shapes:
            launch = task.launch(config, shape)
            assert launch.threads_per_program == int(config["NUM_WARPS"]) * 32
            assert launch.tile_bytes >= launch.smem_bytes >= 0
            assert 1 <= launch.num_stages <= 8 and launch.vector_width >= 1


def test_matmul_tile_and_stages():
    task = TASKS["matmul"]
    cfg = {**task.default_config, "BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64,
           "NUM_STAGES": 3, "NUM_WARPS": 8}
    launch = task.launch(cfg, (4096, 4096, 4096))
    assert launch.programs == 32 * 16
    assert launch.smem_bytes == (128 * 64 + 64 * 256) * 2 * 3
    assert launch.tile_bytes == launch.smem_bytes + 128 * 256 * 4
    assert launch.elements_per_program == 128 * 256 and launch.num_stages == 3


def test_generic_launch_from_knob_names():
    """A task without its own launch gets one from NUM_WARPS / BLOCK_* / ROWS_PER_PROGRAM."""
    softmax = TASKS["softmax"]
    cfg = {**softmax.default_config, "BLOCK_SIZE": 1024, "NUM_WARPS": 8, "NUM_STAGES": 2}
    launch = generic_launch(softmax, cfg, (4096, 4096))
    assert launch.threads_per_program == 256
    assert launch.elements_per_program == 1024
    assert launch.programs == 4096 * 4096 // 1024  # bytes_moved / 2 / size elements
    assert launch.tile_bytes == 1024 * 4 * 2 and launch.num_stages == 2


def test_record_resolvers_for_the_ranker():
    """kernels.records.record_launch / record_cost: what callers pass to rows_from_records."""
    from types import SimpleNamespace

    from kernelkb.kernels.records import record_cost, record_launch

    task = TASKS["softmax"]
    record = SimpleNamespace(task=SimpleNamespace(task_id="softmax", dtype="float16"),
                             edit=SimpleNamespace(config={"NUM_WARPS": 8}))
    label = task.shape_label((128, 4096))
    assert task.parse_shape(label) == (128, 4096)
    assert record_launch(record, label) == task.launch({"NUM_WARPS": 8}, (128, 4096))
    assert record_cost(record, label) == (task.bytes_moved((128, 4096), torch.float16),
                                          task.flops((128, 4096), torch.float16))
    assert record_launch(record, "sweep") is None and record_cost(record, "sweep") == (None, None)
    other = SimpleNamespace(task=SimpleNamespace(task_id="convolution", dtype="unspecified"),
                            edit=SimpleNamespace(config={}))
    assert record_launch(other, label) is None
