"""The exported op's fake (meta) implementation: each output's sizes read from the inputs.

Why: torch.compile traces a custom op through its fake, and without one it cannot take
the op at all; an output shaped like no input (matmul's [M, N] from A [M, K] and
B [K, N]) needs each size said. The rule is read from the task's reference on several of
its own shapes: each output dim is the one input dim that equals it on every shape, the
dtype an input's of the same dtype. Never from the candidate's code.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelkb.kernels.base import Task
from kernelkb.kernels.dtypes import DTYPES

# per output: ([(input index, input dim) per output dim], input index whose dtype it has)
FakeRule = list[tuple[list[tuple[int, int]], int]]


def _outputs(value: Any) -> list[torch.Tensor] | None:
    items = value if isinstance(value, tuple) else (value,)
    return list(items) if all(isinstance(o, torch.Tensor) for o in items) else None


def fake_rule(task: Task, dtype: str = "float32") -> FakeRule | None:
    """The rule, or None when an output size follows no single input size on every
    shape tried (a size the op computes): such an op gets no fake."""
    shapes = list(dict.fromkeys([*task.cpu_shapes, *task.edge_shapes]))[:6]
    samples = []
    for shape in shapes:
        inputs = task.make_inputs(shape, DTYPES[dtype], 0, "cpu")
        outputs = _outputs(task.reference(*[x.clone() if isinstance(x, torch.Tensor) else x
                                              for x in inputs]))
        if outputs is None:
            return None
        samples.append((inputs, outputs))
    rule: FakeRule = []
    for k, out in enumerate(samples[0][1]):
        dims = []
        for d in range(out.ndim):
            found = [(i, e) for i, x in enumerate(samples[0][0]) if isinstance(x, torch.Tensor)
                     for e in range(x.ndim)
                     if all(o[k].ndim == out.ndim and x_[i].ndim == x.ndim
                            and o[k].shape[d] == x_[i].shape[e] for x_, o in samples)]
            if not found:
                return None
            # a size that varies across the shapes tried pins its input dim; prefer those
            varied = [f for f in found if len({x_[f[0]].shape[f[1]] for x_, _ in samples}) > 1]
            dims.append((varied or found)[0])
        like = next((i for i, x in enumerate(samples[0][0]) if isinstance(x, torch.Tensor)
                     and x.dtype == out.dtype), None)
        if like is None:
            return None
        rule.append((dims, like))
    return rule


def fake_source(rule: FakeRule, names: list[str]) -> str:
    """The fake's return expression, e.g. ``torch.empty((a.shape[0], b.shape[1]),
    dtype=a.dtype, device=a.device)``."""
    made = []
    for dims, like in rule:
        sizes = "".join(f"{names[i]}.shape[{e}], " for i, e in dims)
        made.append(f"torch.empty(({sizes}), dtype={names[like]}.dtype, "
                    f"device={names[like]}.device)")
    return made[0] if len(made) == 1 else f"({', '.join(made)})"
