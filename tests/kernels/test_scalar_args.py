"""A task's scalar arguments (Task.scalar_args, RMSNorm's eps) drawn over their legal
range, and the judge's wider draws' builders: a shape past the largest asked
(drawn_shapes.draw_larger) and every value condition in one input set (every_condition.mixed)."""
import math
import random

import pytest
import torch

from kernelkb.kernels.conditions import GENERIC_CONDITIONS, mixed_inputs
from kernelkb.kernels.discovery import get_task
from kernelkb.kernels.drawn_shapes import draw_larger
from kernelkb.kernels.draws import resolve
from kernelkb.kernels.every_condition import MIXED, mixed
from kernelkb.kernels.scalar_args import (
    SCALAR_ARGS,
    Keywords,
    ScalarArg,
    call_with,
    scalar_arguments,
)


def test_a_drawn_scalar_is_never_the_default_and_stays_in_range() -> None:
    arg = ScalarArg("eps", default=1e-6, low=1e-12, high=1e-3, log=True, typical=(1e-5,))
    rng = random.Random(0)
    values = [arg.draw(rng) for _ in range(400)]
    assert all(v != 1e-6 and 1e-12 <= v <= 1e-3 for v in values)
    assert {1e-12, 1e-3, 1e-5} <= set(values)  # the ends and the typical value
    drawn = [v for v in values if v not in (1e-12, 1e-3, 1e-5)]
    assert len(drawn) > 100  # and values across the range, on a log scale
    assert min(drawn) < 1e-9 and max(drawn) > 1e-5
    flag = ScalarArg("causal", default=True, choices=(True, False))
    assert {flag.draw(rng) for _ in range(20)} == {False}


@pytest.mark.parametrize("bad", [
    {"low": 1e-3, "high": 1e-6},  # low over high
    {"low": 0.0, "high": 1.0, "log": True},  # log scale through 0
    {"choices": (1e-6,)},  # nothing but the default
    {},  # neither a range nor choices
])
def test_a_scalar_argument_without_another_legal_value_is_refused(bad) -> None:
    with pytest.raises(ValueError):
        ScalarArg("eps", default=1e-6, **bad)


def test_rmsnorm_checks_eps_drawn_and_the_condition_passes_it_to_run_and_reference() -> None:
    task = get_task("rmsnorm")
    (condition,) = [c for c in task.input_conditions if c.name == SCALAR_ARGS]
    x, w = task.make_inputs((8, 64), torch.float32, 0, "cpu")
    seen = set()
    for seed in range(30):
        *tensors, last = condition.apply((x, w), seed)
        # by position on an even seed, by the task's name on an odd one
        eps = last["eps"] if seed % 2 else last
        assert isinstance(last, Keywords) == bool(seed % 2)
        assert len(tensors) == 2 and 1e-12 <= eps <= 1e-3 and eps != 1e-6
        assert condition.apply((x, w), seed)[2] == last  # the worker's and the judge's agree
        seen.add(eps)
        assert torch.allclose(task.reference(*tensors, eps),
                              call_with(task.reference, (*tensors, Keywords(eps=eps))))
    assert len(seen) > 10
    # a shape of another size draws its own value from the same seed
    other = task.make_inputs((9, 64), torch.float32, 0, "cpu")
    assert any(condition.apply(other, s)[2] != condition.apply((x, w), s)[2]
               for s in range(5))
    assert SCALAR_ARGS not in [c.name for c in get_task("softmax").input_conditions]


def test_scalar_arguments_alone_append_the_values_in_order() -> None:
    args = (ScalarArg("a", default=0.5, low=0.0, high=1.0),
            ScalarArg("b", default=1, choices=(1, 2, 3)))
    out = scalar_arguments(args).apply((torch.zeros(3),), 8)
    assert len(out) == 3 and 0.0 <= out[1] <= 1.0 and out[2] in (2, 3)
    named = scalar_arguments(args).apply((torch.zeros(3),), 7)
    assert len(named) == 2 and isinstance(named[1], Keywords) and list(named[1]) == ["a", "b"]


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "matmul", "swiglu", "rope"])
def test_a_larger_shape_is_past_the_anchor_and_within_the_bounds(name) -> None:
    task = get_task(name)
    asked = [*task.cpu_shapes, *task.edge_shapes]
    bounds = [*task.sweep_shapes, *asked]

    def size(shape):
        return float(task.bytes_moved(shape, torch.float16))

    anchor = max(asked, key=size)
    rng = random.Random(1)
    for _ in range(10):
        shape = draw_larger(bounds, anchor, size, 2 * size(anchor), 3 * size(anchor), rng)
        assert shape is not None
        assert 2 * size(anchor) <= size(shape) <= 3 * size(anchor)
        for i, value in enumerate(shape):
            column = [s[i] for s in bounds]
            assert min(column) <= value <= max(column)


def test_no_larger_shape_where_the_anchor_is_at_the_bounds() -> None:
    bounds = [(1, 1), (8, 16)]

    def size(shape):
        return float(math.prod(shape))

    assert draw_larger(bounds, (8, 16), size, 256.0, 384.0, random.Random(0)) is None


def test_mixed_rows_take_each_value_condition_and_no_layout() -> None:
    task = get_task("softmax")
    (x,) = task.make_inputs((64, 32), torch.float32, 5, "cpu")
    (out,) = resolve(task, MIXED).apply((x,), 5)
    assert out.shape == x.shape and out.stride() == x.stride()
    declared = [c for c in task.input_conditions if c.name not in GENERIC_CONDITIONS]
    n = 1 + len(declared)  # softmax's conditions each change every row
    assert torch.equal(out[0::n], x[0::n])  # the plain rows
    for k, condition in enumerate(declared, 1):
        (under,) = condition.apply((x,), 5 + k)
        assert torch.equal(out[k::n], under[k::n]), condition.name
    # matmul's transposed weight is a layout: nothing of it is mixed in
    mm = get_task("matmul")
    a, b = mm.make_inputs((16, 16, 16), torch.float32, 0, "cpu")
    assert all(isinstance(t, torch.Tensor) and t.is_contiguous()
               for t in mixed(mm).apply((a, b), 0))


def test_mixed_rows_keep_the_rows_a_condition_picks() -> None:
    """RMSNorm's zero row and near-silent row each change one row: both are there, as
    made, beside the rows of the conditions that change every row."""
    task = get_task("rmsnorm")
    x, w = task.make_inputs((8, 64), torch.float32, 3, "cpu")
    mx, mw = mixed(task).apply((x, w), 3)
    assert torch.equal(mw, w)
    zero = (mx.abs().sum(1) == 0).nonzero().flatten().tolist()
    quiet = ((mx.abs().amax(1) < 0.05) & (mx.abs().sum(1) > 0)).nonzero().flatten().tolist()
    assert len(zero) == 1 and len(quiet) == 1
    assert mx.abs().max() > 100  # large values (x50) and the late outlier (x300)
    assert torch.equal(mx[0], x[0])  # and plain rows
    # the scalar arguments' condition draws eps over the same mixed rows
    (condition,) = [c for c in task.input_conditions if c.name == SCALAR_ARGS]
    sx, sw, eps = condition.apply((x, w), 4)
    assert torch.equal(sx, mixed_inputs((x, w), task.input_conditions[:4], 4)[0])
    assert eps != 1e-6
