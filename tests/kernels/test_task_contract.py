"""What every task promises the optimizer: a modest space that covers each knob and variant,
the naive kernel as one of its points, and a render that writes exactly the config."""

from __future__ import annotations

import pytest

from kernelkb.cli.tasks import SPACE_RULE
from kernelkb.kernels.config import header_constants
from kernelkb.kernels.discovery import all_tasks

TASKS = sorted(all_tasks().values(), key=lambda t: t.name)


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_space_is_sized_for_one_gpu_sweep_and_covers_every_value(task):
    space = list(task.space())
    assert SPACE_RULE[0] <= len(space) <= SPACE_RULE[1]
    assert task.constraint(task.default_config) is None  # the naive kernel is a point
    for param in (*task.knobs, *task.variants):
        assert {cfg[param.name] for cfg in space} == set(param.values), param.name


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.name)
def test_render_header_matches_config(task):
    for config in task.space():
        header = header_constants(task.render(config))
        assert {k: header[k] for k in config} == config
    # unchanged lines stay byte for byte: the replay matches sources to configurations
    assert task.render(task.default_config) == task.template
