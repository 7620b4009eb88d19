"""Shape regimes: every task declares them, every shape lands in one, the op's inputs carry
the dims the exported kernel dispatches on, and an old record's regime is derived."""

from __future__ import annotations

import math

import pytest
import torch

from kernelkb.kernels.discovery import all_tasks, get_task
from kernelkb.kernels.records import record_regime
from kernelkb.kernels.regimes import SINGLE_REGIME, Regimes


def _expected(task, shape) -> str:
    """The rule applied by hand: product of the dims against the inclusive bounds."""
    value = math.prod(shape[task.shape_names.index(d)] for d in task.regimes.dims)
    return next(name for name, bound in task.regimes.classes if bound is None or value <= bound)


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_every_shape_of_every_task_falls_in_a_declared_regime(name: str) -> None:
    task = get_task(name)
    assert task.regimes is not SINGLE_REGIME, f"{name} declares no regimes"
    assert task.regimes.reason.strip()
    for shape in (*task.sweep_shapes, *task.edge_shapes, *task.cpu_shapes):
        assert task.regime(shape) == _expected(task, shape), shape
    swept = task.shapes_by_regime(task.sweep_shapes)
    assert len(swept) >= 2, f"{name}: the sweep sits in one regime ({list(swept)})"
    assert list(swept) == [n for n in task.regimes.names if n in swept]  # the task's order
    assert sum(map(len, swept.values())) == len(task.sweep_shapes)


@pytest.mark.parametrize("name", sorted(all_tasks()))
def test_the_inputs_carry_the_regime_dims(name: str) -> None:
    """What the exported op reads (input index, tensor dim) is the shape's dim."""
    task = get_task(name)
    for shape in (*task.cpu_shapes, *task.edge_shapes):
        inputs = task.make_inputs(shape, torch.float16, 0, "cpu")
        for dim, (i, d) in zip(task.regimes.dims, task.regimes.inputs, strict=True):
            assert inputs[i].shape[d] == shape[task.shape_names.index(dim)], (shape, dim)


def test_known_regimes_of_the_issue() -> None:
    softmax, matmul, attention = get_task("softmax"), get_task("matmul"), get_task("attention")
    assert softmax.regime((1024, 128256)) == softmax.regime((4096, 32768)) == "long_rows"
    assert softmax.regime((32768, 1024)) == "short_rows"
    assert matmul.regime((16, 4096, 4096)) == "skinny" and matmul.regime((4096, 4096, 4096)) \
        == "large"
    assert attention.regime((32, 32, 4, 1020, 128)) == "decode"
    assert attention.regime((1, 32, 4096, 0, 128)) == "long_prefill"


@pytest.mark.parametrize("kwargs, message", [
    ({"classes": (("a", 1), ("a", None))}, "unique"),
    ({"classes": (("Big", None),)}, "lower-case"),
    ({"classes": (("a", None), ("b", 4))}, "only the last"),
    ({"classes": (("a", 8), ("b", 4), ("c", None))}, "increase"),
    ({"reason": " "}, "why"),
    ({"inputs": ()}, r"one \(input index"),
])
def test_bad_regime_declarations_are_refused(kwargs: dict, message: str) -> None:
    spec = {"dims": ("cols",), "classes": (("a", 4), ("b", None)), "reason": "r",
            "inputs": ((0, 1),), **kwargs}
    with pytest.raises(ValueError, match=message):
        Regimes(**spec)


def test_a_regime_on_a_dim_the_task_lacks_is_refused() -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match="field regimes.dims: .tokens. is not a shape name"):
        replace(get_task("softmax"), name="softmax_bad",
                regimes=Regimes(dims=("tokens",), inputs=((0, 0),), classes=(("a", None),),
                                reason="r"))


def _record(task_id: str, shape_set: str, timings: list[str], regime: str | None = None):
    from kernelkb.kb.record import parse_record

    return parse_record({
        "run_id": "r", "iteration": 1,
        "task": {"op_type": task_id, "task_id": task_id, "dtype": "float16",
                 "shape_set": shape_set, "regime": regime},
        "env": {"gpu_name": "NVIDIA H200", "arch": "sm_90", "triton_version": "3.6.0",
                "torch_version": "2.11"},
        "edit": {"summary": "s", "categories": ["tiling"], "child_hash": "abcdefgh12"},
        "feedback": {"stage": "performance", "timing_available": True, "time_ms": 0.1,
                     "timings": [{"shape": s, "median_ms": 0.1} for s in timings]},
        "verdict": "improved", "provenance": {"agent": "test"}})


def test_an_old_record_gets_its_regime_from_its_shapes() -> None:
    long_only = _record("softmax", "tune", ["rows=4096,cols=32768", "rows=1,cols=32000"])
    assert long_only.task.regime is None and record_regime(long_only) == "long_rows"
    both = _record("softmax", "tune", ["rows=1,cols=32000", "rows=4,cols=128"])
    assert record_regime(both) == "short_rows+long_rows"  # in the task's order
    labels = _record("matmul", "custom:M=16,N=4096,K=4096;M=1024,N=4096,K=4096", [])
    assert record_regime(labels) == "skinny+medium"
    assert record_regime(_record("softmax", "tune", [])) is None  # nothing to parse
    assert record_regime(_record("convolution", "problem_size=4096x4096", [])) is None
    kept = _record("softmax", "tune", ["rows=4,cols=128"], regime="long_rows")
    assert record_regime(kept) == "long_rows"  # what the run recorded wins


def test_a_record_refuses_a_malformed_regime() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="regime"):
        _record("softmax", "tune", [], regime="Long Rows")
    old = _record("softmax", "tune", [])
    assert "regime" not in old.model_dump(mode="json", exclude_none=True)["task"]
