"""Input conditions by parameters: row patterns and memory layouts a property-based draw
varies, named so the worker and the judge build the same inputs.

Why: each task declares a few fixed conditions (softmax's first half at -inf, RMSNorm's
outlier in the last column), and a kernel can be right on exactly those and wrong a
column later, on a mask at -1e4 instead of -inf, on every other row, or on a weight
passed transposed. A draw over the parameters of these patterns, and over the layouts
real callers pass (``x @ W.t()``; a (B, S, H, D) buffer seen as (B, H, S, D)), meets the
cases no fixed list names; the judge's search (optimizer/sandbox/properties.py) shrinks
a failing one to its smallest form.

A ``Draw`` is named ``drawn {json}``; ``resolve(task, name)`` gives the condition of a
declared name or of a drawn one, in any process that has the task. Patterns apply to
the rows (the last dimension) of one input, layouts to the float inputs of two or more
dimensions that the op does not write.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

from kernelkb.kernels import far_rows, unusual_inputs
from kernelkb.kernels.conditions import LEADING_DIMS, InputCondition, leading_dims
from kernelkb.kernels.every_condition import mixed, mixed_shift

PREFIX = "drawn "
PATTERNS = ("prefix", "suffix", "spike", "outlier", "constant", "offset")
LAYOUTS = ("padded", "transposed", "swapped")


@dataclass(frozen=True)
class Draw:
    """One drawn condition: a task's declared condition (or none), then a row pattern on
    input ``input``, then a layout."""

    declared: str | None = None
    pattern: str | None = None  # one of PATTERNS
    input: int = 0
    share: float = 0.5  # prefix / suffix: share of the row; spike / outlier: where (0..1)
    value: float = 0.0  # the fill, the spike, the outlier's factor or the position offset
    every: int = 1  # the pattern on every n-th row
    layout: str | None = None  # one of LAYOUTS
    pad: int = 16  # padded: elements past each row
    layout_inputs: tuple[int, ...] = ()  # transposed / swapped: which inputs

    @property
    def name(self) -> str:
        data = {f.name: v for f in fields(self)
                if (v := getattr(self, f.name)) != f.default}
        return PREFIX + json.dumps(data, sort_keys=True)

    @classmethod
    def parse(cls, name: str) -> Draw:
        data = json.loads(name[len(PREFIX):])
        if "layout_inputs" in data:
            data["layout_inputs"] = tuple(int(i) for i in data["layout_inputs"])
        return cls(**data)

    def condition(self, task: Any) -> InputCondition:
        declared = _declared(task, self.declared) if self.declared else None
        mutated = tuple(getattr(task, "mutated_inputs", ()) or ())

        def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
            if declared is not None:
                inputs = declared.apply(inputs, seed)
            inputs = tuple(inputs)
            if self.pattern and self.input < len(inputs):
                changed = list(inputs)
                changed[self.input] = _answerable(inputs[self.input],
                                                  _pattern(inputs[self.input], self))
                inputs = tuple(changed)
            if self.layout:
                inputs = tuple(_laid_out(x, self) if _lays_out(i, x, self, mutated) else x
                               for i, x in enumerate(inputs))
            return inputs

        return InputCondition(self.name, "a drawn condition: " + _describe(self), apply)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def resolve(task: Any, name: str) -> InputCondition:
    """The condition ``name`` names: one the task declares, a drawn one, or ``mixed``'s."""
    if name.startswith(PREFIX):
        return Draw.parse(name).condition(task)
    if (shift := mixed_shift(name)) is not None:
        return mixed(task, shift)
    if name == LEADING_DIMS and getattr(task, "leading_dims", None):
        return leading_dims(tuple(task.leading_dims))
    if name.startswith(far_rows.PREFIX):
        return far_rows.Far.parse(name).condition(task)
    if name.startswith(unusual_inputs.UNUSUAL):
        return unusual_inputs.resolve(task, name)
    return _declared(task, name)




def _declared(task: Any, name: str) -> InputCondition:
    (condition,) = [c for c in task.input_conditions if c.name == name]
    return condition


def _pattern(x: Any, draw: Draw) -> Any:
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0:
        return x
    x = x.clone()
    if draw.pattern == "offset":  # positions: a long context's, not the first few
        return x + int(draw.value) if not x.is_floating_point() else x + draw.value
    rows = x.view(-1, x.shape[-1]) if x.is_contiguous() else x.reshape(-1, x.shape[-1])
    n = rows.shape[1]
    picked = rows[:: max(1, draw.every)]
    value = _fill(draw.value, x.dtype)
    width = min(n - 1, max(1, math.ceil(draw.share * n)))  # a row masked whole has no answer
    at = min(n - 1, max(0, round(draw.share * (n - 1))))
    if draw.pattern in ("prefix", "suffix") and width < 1:
        return x
    if draw.pattern == "prefix":
        picked[:, :width] = value
    elif draw.pattern == "suffix":
        picked[:, n - width:] = value
    elif draw.pattern == "spike":  # the only column at -inf would be a row with no answer
        picked[:, at] = value if math.isfinite(value) or n > 1 else \
            _fill(math.copysign(3e38, value), x.dtype)
    elif draw.pattern == "outlier":  # within the dtype's range
        info = torch.finfo(x.dtype)
        picked[:, at] = (picked[:, at].double() * draw.value).clamp(info.min, info.max
                                                                     ).to(x.dtype)
    elif draw.pattern == "constant":  # a whole row at -inf has no softmax: the lowest
        picked[:] = value if math.isfinite(value) else _fill(math.copysign(3e38, value),
                                                             x.dtype)
    if not x.is_contiguous():
        x.copy_(rows.view(x.shape))
    return x


def _answerable(before: Any, after: Any) -> Any:
    """A pattern laid over a declared condition (a masked suffix, then a masked prefix)
    can leave a row with no finite value, which has no softmax: such a row gets its last
    value from before the pattern back (a row masked whole is nobody's input)."""
    if not isinstance(after, torch.Tensor) or not after.is_floating_point() \
            or after.dim() == 0 or after.numel() == 0:
        return after
    rows = after.reshape(-1, after.shape[-1])
    dead = ~torch.isfinite(rows).any(dim=-1)
    if not bool(dead.any()):
        return after
    fixed = rows.clone()
    fixed[dead, -1] = torch.nan_to_num(before.reshape(-1, before.shape[-1])[dead, -1],
                                       neginf=0.0, posinf=0.0)
    out = after.clone()
    out.copy_(fixed.view(after.shape))
    return out


def _fill(value: float, dtype: torch.dtype) -> float:
    """A finite value past the dtype's range is its lowest or highest one (an additive
    mask of ``finfo(dtype).min``, as Hugging Face builds one)."""
    if not dtype.is_floating_point or not math.isfinite(value):
        return value
    info = torch.finfo(dtype)
    return min(max(value, info.min), info.max)


def _lays_out(index: int, x: Any, draw: Draw, mutated: tuple[int, ...]) -> bool:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or index in mutated:
        return False
    if draw.layout == "padded":
        return x.dim() >= 2
    return index in draw.layout_inputs and x.dim() >= (2 if draw.layout == "transposed" else 3)


def _laid_out(x: torch.Tensor, draw: Draw) -> torch.Tensor:
    """The same values in another memory layout: rows of a wider buffer (NaN past each
    row), the transpose of a row-major buffer (``W.t()``), or dims 1 and 2 swapped in
    memory (a (B, S, H, D) buffer seen as (B, H, S, D))."""
    if draw.layout == "padded":
        wider = torch.full((*x.shape[:-1], x.shape[-1] + draw.pad), float("nan"),
                           dtype=x.dtype, device=x.device)
        view = wider[..., : x.shape[-1]]
        view.copy_(x)
        return view
    if draw.layout == "transposed":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x.transpose(1, 2).contiguous().transpose(1, 2)


def _describe(draw: Draw) -> str:
    parts = [f"the task's {draw.declared!r}"] if draw.declared else []
    if draw.pattern:
        rows = "every row" if draw.every <= 1 else f"every {draw.every}th row"
        parts.append(f"{draw.pattern} ({draw.share:.2f} of the row, value {draw.value:g}) on "
                     f"{rows} of input {draw.input}")
    if draw.layout:
        parts.append(f"{draw.layout} layout" + (f" (+{draw.pad})" if draw.layout == "padded"
                                                else f" of inputs {list(draw.layout_inputs)}"))
    return "; ".join(parts) or "the plain draw"


@dataclass(frozen=True)
class Space:
    """What a draw may vary for an op: the row patterns of one input (and the values
    they take), and which inputs callers pass in another layout."""

    input: int | None = None
    patterns: tuple[str, ...] = ()
    values: tuple[float, ...] = ()
    layout: str | None = None  # transposed / swapped, besides padded (every op)
    layout_inputs: tuple[int, ...] = ()


# per op type: the rows users' inputs have (additive masks at -inf, -1e4 or the dtype's
# lowest; spikes late in a row; outlier channels; constant rows; positions of a long
# context) and the layouts callers pass; an op not named gets padded rows only
SPACES: dict[str, Space] = {
    "softmax": Space(0, ("prefix", "suffix", "spike", "constant"),
                     (-math.inf, -1e4, -3e38, 100.0, 30.0)),
    "rmsnorm": Space(0, ("outlier", "spike", "constant"), (0.0, 1e-3, 300.0, 60.0)),
    "swiglu": Space(0, ("spike", "constant", "outlier"), (30.0, -80.0, 0.0, 20.0)),
    "rope": Space(2, ("offset",), (4096.0, 32768.0, 131072.0, 1000000.0), "swapped", (0, 1)),
    "attention": Space(layout="swapped", layout_inputs=(0, 1, 2)),
    "matmul": Space(0, ("constant", "spike"), (0.0, 1.0, 30.0), "transposed", (1,)),
}


def space_of(task: Any) -> Space:
    return SPACES.get(getattr(task, "op_type", ""), Space())
