"""One input set holding every declared condition of a task's values at once: what the
judge asks where a call per condition would cost too much (the shape past the largest
asked, the wider rows of the last lap), and what a drawn condition may name."""

from __future__ import annotations

from typing import Any

from kernelkb.kernels.conditions import GENERIC_CONDITIONS, InputCondition, mixed_inputs
from kernelkb.kernels.scalar_args import SCALAR_ARGS

MIXED = "rows of every condition"
_FROM = ", rows from condition "  # a shifted one's name: the worker rebuilds it by name


def mixed_shift(name: str) -> int | None:
    """The shift a name of ``mixed`` carries (0 for ``MIXED``); None: another name."""
    if name == MIXED:
        return 0
    prefix = MIXED + _FROM
    if name.startswith(prefix) and name[len(prefix):].isdigit():
        return int(name[len(prefix):])
    return None


def mixed(task: Any, shift: int = 0) -> InputCondition:
    """One input set that holds every declared condition of the task's values at once
    (conditions.mixed_inputs: rows in turn plain and under each condition that changes every
    row, and the rows a condition picks as it made them). One call then meets each
    condition somewhere, where a call per condition would cost as many calls: what the
    judge asks on a shape whose calls are dear (the one past the largest asked).
    ``shift``: the condition the first row takes (mod their count; 0 plain): a shape of
    fewer rows than conditions then meets a drawn few of them, not always the first."""
    declared = [c for c in task.input_conditions
                if c.name not in GENERIC_CONDITIONS and c.name != SCALAR_ARGS]

    def apply(inputs: tuple[Any, ...], seed: int) -> tuple[Any, ...]:
        return mixed_inputs(tuple(inputs), declared, seed, shift)

    name = MIXED if shift == 0 else f"{MIXED}{_FROM}{shift}"
    return InputCondition(name, "each input's rows in turn plain and under each of the "
                          "task's conditions of the values", apply)
