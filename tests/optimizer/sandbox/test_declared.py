"""The rules that closed red team 5's open plants, each on its own and cheap: run()'s
signature against the task's names, the header against what was launched, scalar
arguments by name, non-finite inputs compared exactly, and a kept buffer a call leaves
changed (declared.py, kernels/conditions.py, checks.py, launch_plan.py)."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from kernelkb.kernels.conditions import NONFINITE
from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.kernels.scalar_args import SCALAR_ARGS, Keywords, call_with
from kernelkb.optimizer.sandbox import checks, declared, launch_plan

BAD = Path(__file__).resolve().parents[2] / "bad_kernels"
RMSNORM_SIGNATURE = get_task("rmsnorm").signature


def _problem(run) -> str | None:
    return declared.signature_problem(run, 2, ["eps"], RMSNORM_SIGNATURE)


def test_a_run_that_takes_eps_by_position_and_by_name_passes() -> None:
    def run(x, weight, eps=1e-6):
        return x

    def forwarding(*args, **kwargs):
        return args

    assert _problem(run) is None
    assert _problem(forwarding) is None  # the calls decide: they meet both forms


def test_a_run_that_loses_eps_by_one_form_is_refused_in_words() -> None:
    def renamed(x, weight, epsilon=1e-6, **_options):
        return x

    def keyword_only(x, weight, *_extra, eps=1e-6):
        return x

    def no_keyword(x, weight, epsilon=1e-6):
        return x

    def no_position(x, weight):
        return x

    assert "by its name into '**_options'" in (_problem(renamed) or "")
    assert "by position into '*_extra'" in (_problem(keyword_only) or "")
    assert "cannot take eps by name" in (_problem(no_keyword) or "")
    assert "cannot take eps by position" in (_problem(no_position) or "")
    assert "the task's: run(x" in (_problem(renamed) or "")


def test_every_template_reads_its_header_and_the_lying_header_does_not() -> None:
    for task in all_tasks().values():
        assert declared.unread_constants(task.template, [p.name for p in task.params]) == []
    source = (BAD / "redteam5_config_header_lies.py").read_text()
    softmax = [p.name for p in get_task("softmax").params]
    assert declared.unread_constants(source, softmax) == \
        ["BLOCK_SIZE", "NUM_WARPS", "ROWS_PER_PROGRAM", "ONLINE"]


def test_the_launched_warps_and_stages_must_be_the_headers() -> None:
    def launch(**kwargs):
        return ((4, 1, 1), (), tuple(sorted(kwargs.items())))

    header = {"NUM_WARPS": 16, "NUM_STAGES": 2}
    assert "NUM_WARPS = 16" in (declared.launch_problem(header, [launch(num_warps=4)]) or "")
    assert declared.launch_problem(header, [launch(num_warps=16, num_stages=2)]) is None
    # a launch that passes no num_warps gets Triton's 4; no num_stages: the backend's
    assert declared.launch_problem({"NUM_WARPS": 4, "NUM_STAGES": 3}, [launch()]) is None
    assert declared.launch_problem({"NUM_WARPS": 8}, [launch()]) is not None
    assert "NUM_STAGES = 2" in (declared.launch_problem(
        header, [launch(num_warps=16, num_stages=1)]) or "")
    # a second kernel with its own warps beside the main one is fine
    assert declared.launch_problem(header, [launch(num_warps=16, num_stages=2),
                                            launch(num_warps=4)]) is None


def test_scalar_arguments_go_by_position_or_by_name_as_the_seed_says() -> None:
    task = get_task("rmsnorm")
    condition = next(c for c in task.input_conditions if c.name == SCALAR_ARGS)
    inputs = task.make_inputs((4, 64), torch.float32, 0, "cpu")
    even, odd = condition.apply(inputs, 10), condition.apply(inputs, 11)
    assert len(even) == 3 and isinstance(even[2], float)
    assert isinstance(odd[2], Keywords) and set(odd[2]) == {"eps"}
    seen = {}
    call_with(lambda x, w, eps=None: seen.update(eps=eps), odd)
    assert seen["eps"] == odd[2]["eps"]


def test_nonfinite_inputs_come_out_where_the_reference_puts_them() -> None:
    task = get_task("softmax")
    condition = next(c for c in task.input_conditions if c.name == NONFINITE)
    x, = task.make_inputs((8, 64), torch.float32, 3, "cpu")
    held, = condition.apply((x,), 3)
    assert held.shape == x.shape and held.stride() == x.stride()
    assert torch.isnan(held).any() and torch.isposinf(held).any() and torch.isneginf(held).any()
    ref = task.reference(held)
    assert torch.isnan(ref).any()
    assert checks.shape_verdict(checks.compare_outputs(ref.clone(), ref, 1e-5, 1e-5),
                                1e-5) is None
    masked = torch.softmax(torch.nan_to_num(held, nan=-math.inf), dim=-1)  # NaN as a mask
    stats = checks.compare_outputs(masked, ref, 1e-5, 1e-5)
    assert checks.shape_verdict(stats, 1e-5) == "wrong_result"


def test_a_kept_buffer_the_call_leaves_changed_is_seen() -> None:
    kept = torch.zeros(16)
    table = torch.arange(16.0)
    plan = launch_plan.Plan(inputs=[torch.ones(4)])
    plan.see((kept, table))
    kept[3] = 1.0  # the call leaves state behind; the table is only read
    assert plan.kept_and_changed() == [kept.untyped_storage().nbytes()]
    kept[3] = 0.0  # returned to its former state (split-K counters zeroed after use)
    assert plan.kept_and_changed() == []
