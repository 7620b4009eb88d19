"""A task's scalar arguments (RMSNorm's ``eps``): declared with their legal ranges,
passed by position or by name, and checked with values other than their defaults.

Imports only torch: it runs on a bare GPU host, beside the sandbox.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kernelkb.kernels.conditions import InputCondition, mixed_inputs


@dataclass(frozen=True)
class ScalarArg:
    """An argument of ``run()`` past the tensors that callers set (RMSNorm's ``eps``), in
    ``run()``'s order after the inputs ``make_inputs`` gives: its default (what every call
    without it gets) and its legal range, ``low`` to ``high`` (log-uniform when ``log``),
    or ``choices`` for a flag or an enumeration. ``typical``: values real callers pass
    (Llama's 1e-5), drawn as often as the range."""

    name: str
    default: float | int | bool
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[float | int | bool, ...] = ()
    typical: tuple[float | int | bool, ...] = ()

    def __post_init__(self) -> None:
        ranged = self.low is not None and self.high is not None
        if ranged == bool(self.choices):
            raise ValueError(f"scalar argument {self.name}: a range (low, high) or choices")
        if ranged and not (self.low < self.high and (not self.log or self.low > 0)):  # type: ignore[operator]
            raise ValueError(f"scalar argument {self.name}: low < high (and > 0 if log)")
        if not self.others():
            raise ValueError(f"scalar argument {self.name}: no legal value but its default")

    def others(self) -> tuple[float | int | bool, ...]:
        """The listed values (range ends, choices, typical ones) that are not the default."""
        ends = (self.low, self.high) if self.low is not None else ()
        listed = (*ends, *self.choices, *self.typical)
        return tuple(dict.fromkeys(v for v in listed if v is not None and v != self.default))

    def draw(self, rng: random.Random) -> float | int | bool:
        """A legal value other than the default: a listed one (an end of the range, a
        choice, a typical value) or, for a range, one drawn across it."""
        if self.choices or rng.random() < 0.5:
            return rng.choice(self.others())
        assert self.low is not None and self.high is not None
        for _ in range(8):
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high))) \
                if self.log else rng.uniform(self.low, self.high)
            if value != self.default:
                return value
        return rng.choice(self.others())


SCALAR_ARGS = "other scalar arguments"


class Keywords(dict):  # type: ignore[type-arg]
    """Arguments a check passes to ``run()`` (and to the reference) by name, as the last
    element of an input set: ``call_with`` splits them off. A condition returns one to
    call the op the way its users write it (``run(x, w, eps=1e-5)``)."""


def call_with(fn: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    """``fn(*inputs)``, a trailing ``Keywords`` passed by name."""
    args, kwargs = split_keywords(inputs)
    return fn(*args, **kwargs)


def split_keywords(inputs: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
    """(the positional inputs, the ``Keywords`` at the end or {})."""
    items = list(inputs)
    if items and isinstance(items[-1], Keywords):
        return items[:-1], dict(items[-1])
    return items, {}


def scalar_arguments(args: tuple[ScalarArg, ...],
                     declared: tuple[InputCondition, ...] = ()) -> InputCondition:
    """The task's scalar arguments (``Task.scalar_args``) passed with values other than
    their defaults, drawn over their legal ranges from the seed and the inputs' sizes (so
    each shape of an evaluation gets its own), on inputs that hold every ``declared``
    condition of the values at once (``mixed_inputs``: an ``eps`` shows only on a row
    whose mean square is near it). Every other check calls ``run(*inputs)`` with the
    defaults, and a kernel honest only there (another ``eps`` takes a PyTorch path, or
    is ignored) is seen here.

    Passed by position on an even seed and by the names the task gives them
    (``Keywords``) on an odd one: users write both (``run(x, w, 1e-5)``,
    ``run(x, w, eps=1e-5)``), and a ``run(x, w, epsilon=1e-6, **_)`` that swallows the
    task's name is right only by position. The worker gives each shape its own seed, so
    an evaluation of two shapes or more meets both forms; the judge's seeds are drawn."""

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        sizes = [int(x.numel()) for x in inputs if isinstance(x, torch.Tensor)]
        rng = random.Random(f"{seed}:{sizes}")
        values = [arg.draw(rng) for arg in args]
        tensors = mixed_inputs(tuple(inputs), declared, seed)
        if seed % 2:
            return (*tensors, Keywords(zip((a.name for a in args), values, strict=True)))
        return (*tensors, *values)

    names = ", ".join(a.name for a in args)
    return InputCondition(SCALAR_ARGS, f"run() called with {names} other than the default, "
                          "drawn over the legal range, by position or by name, on rows "
                          "under each of the task's conditions", apply)
