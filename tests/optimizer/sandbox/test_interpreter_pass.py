"""The interpreter's pass beside a GPU evaluation (interpreter_pass.py): it finds an
access past a tensor's end that the GPU's checks cannot see, and proves nothing (without
failing anyone) where the interpreter cannot run the kernel. Run here on the CPU, as it
runs on a GPU host: its own jailed worker, the GPU hidden from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelkb.kernels.discovery import get_task
from kernelkb.optimizer.sandbox import interpreter_pass
from kernelkb.optimizer.sandbox.runner import worker_env

BAD = Path(__file__).parents[2] / "bad_kernels"


def _gpu_request(task_name: str, source: str) -> dict:
    """A GPU evaluation's request, as evaluate() writes it."""
    return {"mode": "evaluate", "task": task_name, "source": source, "dtype": "float16",
            "shapes": [[4096, 4096]], "seeds": 3, "timing": True, "seed_base": 12345,
            "conditions": True, "refuse_introspection": True, "parent_timings": {"x": 1.0},
            "parent_source": source, "settle_s": 3.0, "peaks": {}}


def test_a_read_past_the_end_whose_values_are_discarded_is_found():
    task = get_task("softmax")
    found = interpreter_pass.run(task, _gpu_request(
        "softmax", (BAD / "oob_read_discarded.py").read_text()))
    assert found.failure is not None, found.note
    assert "out-of-bounds load" in found.failure and "line 17" in found.failure, found.failure
    assert found.failing_shapes and set(found.failing_shapes) <= {
        task.shape_label(s) for s in (*task.cpu_shapes, *task.edge_shapes)}


@pytest.mark.slow  # two whole evaluations in the interpreter (~15 s quiet)
def test_an_honest_kernel_is_in_bounds_and_one_the_interpreter_cannot_run_is_not_failed():
    task = get_task("softmax")
    honest = interpreter_pass.run(task, _gpu_request("softmax", task.template))
    assert honest.failure is None and honest.note.startswith("every access in bounds"), \
        honest.note
    broken = task.template.replace("def run(x):", "def run(x):\n    raise RuntimeError("
                                   "'needs the GPU')", 1)
    skipped = interpreter_pass.run(task, _gpu_request("softmax", broken))
    assert skipped.failure is None and "not checked" in skipped.note, skipped.note
    assert "needs the GPU" in skipped.note


def test_the_pass_checks_small_shapes_once_untimed_and_alone():
    task = get_task("softmax")
    request = interpreter_pass.request_for(task, _gpu_request("softmax", task.template))
    assert request["shapes"] == [list(s) for s in (*task.cpu_shapes, *task.edge_shapes)]
    assert (request["seeds"], request["timing"], request["parent_source"]) == (1, False, None)
    assert request["bounds_only"] and not request["conditions"]  # one checked call a shape
    assert request["seed_base"] == 12345 and request["source"] == task.template


def test_the_interpreters_worker_sees_no_gpu():
    env = worker_env({"CUDA_VISIBLE_DEVICES": "0", "PATH": "/bin"}, "/tmp/kernelkb_env_test",
                     use_gpu=False, run_id="x")
    assert env["TRITON_INTERPRET"] == "1" and env["CUDA_VISIBLE_DEVICES"] == ""
    gpu = worker_env({"CUDA_VISIBLE_DEVICES": "0", "PATH": "/bin"}, "/tmp/kernelkb_env_test",
                     use_gpu=True, run_id="x")
    assert "TRITON_INTERPRET" not in gpu and gpu["CUDA_VISIBLE_DEVICES"] == "0"
