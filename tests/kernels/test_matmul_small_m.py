"""Matmul's small-M moves: split-K reduced by fp32 atomics in one launch (SPLIT_REDUCE).

Each atomic point of the space against the reference on odd shapes (M=1, M=77, K not a
multiple of any K step, N odd); the kept workspace and counters are zero after every
call, so the next call of any size starts clean; what the constraint refuses and what
Task.launch says the reduction costs. bf16 runs on a GPU only: the interpreter's tl.dot
on bf16 is wrong (tests/kernels/test_matmul.py says why).
"""

from __future__ import annotations

import json

import pytest
import torch
from kernel_checks import assert_task_close, candidate_for, check_config

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task

TASK = get_task("matmul")
ATOMIC = [c for c in TASK.space() if c["SPLIT_REDUCE"] == "atomic"]
ODD = ((1, 45, 130), (77, 33, 200), (1, 1, 1))
ON_GPU = torch.cuda.is_available()


def _point(split: int, bn: int = 64, bk: int = 64, stages: int = 4) -> dict:
    return {**TASK.default_config, "BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk,
            "NUM_STAGES": stages, "SPLIT_K": split, "SPLIT_REDUCE": "atomic"}


def test_the_atomic_points_cover_every_split_and_tile():
    assert {c["SPLIT_K"] for c in ATOMIC} == {2, 4, 8, 16}
    assert len(ATOMIC) == 12 and all(c["BLOCK_M"] == 16 for c in ATOMIC)
    assert TASK.default_config["SPLIT_K"] == 1
    assert TASK.default_config["SPLIT_REDUCE"] == "kernel"  # the naive kernel as it was


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("config", ATOMIC, ids=lambda c: f"s{c['SPLIT_K']}-n{c['BLOCK_N']}"
                         f"-k{c['BLOCK_K']}")
def test_every_atomic_point_matches_the_reference_on_odd_shapes(config, dtype, seed, device):
    if dtype == "bfloat16" and not ON_GPU:
        pytest.skip("interpreter: tl.dot on bf16 unsupported (triton-lang/triton#11584)")
    for shape in ODD:
        check_config(TASK, config, shape, dtype, seed=seed, device=device)


def test_transposed_weight_and_a_split_past_k(seed, device):
    """B as W.t() (strides (1, K)); 16 splits of a K of 3 steps leave splits empty, which
    still count in."""
    module = candidate_for(TASK, _point(16))
    a, b = TASK.make_inputs((5, 37, 150), torch.float16, seed, device)
    (a, wt), = [TASK.input_conditions[0].apply((a, b), seed)]
    assert wt.stride() == (1, 150)
    assert_task_close(TASK, "float16", module.run(a, wt), TASK.reference(a, wt),
                      label="W.t() split 16")


def test_workspace_and_counters_are_zero_after_each_call(seed, device):
    """The reduction keeps its scratch across calls: each call must leave it zero, and a
    larger call after a smaller one (the workspace grows) is right too."""
    module = load_candidate(TASK.render(_point(4, bn=128)), "matmul_atomic_scratch")
    for shape in ((3, 40, 300), (77, 130, 257), (2, 20, 64)):
        a, b = TASK.make_inputs(shape, torch.float16, seed, device)
        out = module.run(a, b)
        assert_task_close(TASK, "float16", out, TASK.reference(a, b), label=str(shape))
        (ws, count), = module._ATOMIC_SCRATCH.values()
        assert ws.numel() >= shape[0] * shape[1]
        assert not ws.any() and not count.any(), shape


def test_the_constraint_refuses_what_was_not_built_or_measured():
    illegal = {
        "atomic without split": {**_point(4), "SPLIT_K": 1},
        "atomic on TMA": {**_point(4), "PERSISTENT_TMA": True, "GROUP_M": 1},
        "kernel-sum at 8 splits": {**_point(8), "SPLIT_REDUCE": "kernel"},
        "atomic on 64-row tiles": {**_point(4), "BLOCK_M": 64},
        "atomic with EVEN_K": {**_point(4), "EVEN_K": True},
        "atomic, unlisted tile": _point(4, bn=256),
        "TMA at 8 splits": {**TASK.default_config, "PERSISTENT_TMA": True, "SPLIT_K": 8,
                            "BLOCK_N": 64, "NUM_STAGES": 4},
    }
    for name, config in illegal.items():
        assert TASK.why_illegal(config) is not None, name
    assert TASK.why_illegal(_point(4)) is None


def test_launch_counts_one_kernel_for_atomic_and_two_for_the_summing_kernel():
    shape = (16, 4096, 4096)
    atomic = TASK.launch(_point(8), shape, "float16")
    summed = TASK.launch({**_point(4, stages=3), "SPLIT_REDUCE": "kernel"}, shape, "float16")
    plain = TASK.launch(TASK.default_config, shape, "float16")
    assert (atomic.launches, atomic.reduction_splits, atomic.programs) == (1, 8, 64 * 8)
    assert (summed.launches, summed.reduction_splits) == (2, 4)
    assert summed.programs == 64 * 4 + 16 * 4096 // 1024  # the summing kernel's programs
    assert (plain.launches, plain.reduction_splits, plain.programs) == (1, 1, 64)


def test_the_sandbox_worker_passes_an_atomic_point(tmp_path):
    """The evaluator's own checks (Triton-only rule, the counterfactual call on decoys,
    the launch-plan replay on fresh inputs) accept scratch kept across calls that each
    call leaves zero."""
    from in_process_worker import evaluate_here

    request = {"task": "matmul", "dtype": "float16", "shapes": [[33, 70, 100], [1, 45, 257]],
               "seeds": 2, "source": TASK.render(_point(4)),
               "result_path": str(tmp_path / "result.json"), "refuse_introspection": True,
               "refuse_surroundings": False}  # in this process: the test's own readers
    evaluate_here(request)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result.get("error_kind") is None, result.get("error_message")
    assert result["stage"] == "correctness"
