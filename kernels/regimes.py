"""How a task's shapes fall into regimes, the unit a configuration is tuned for.

Standard library only: the validation of a task and an exported kernel's dispatch table
read it without torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

REGIME_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class Regimes:
    """How a task's shapes fall into regimes: a configuration is best for a regime (a row
    length class, an M bucket, prefill vs decode), not for the whole task.

    Declarative on purpose, so an exported kernel can classify a call's inputs without
    KernelKB installed: the product of the shape dimensions ``dims`` (read from the op's
    inputs at ``inputs``: (input index, tensor dimension) per dim) is compared with each
    class's inclusive upper bound in order; the last class has bound None (no limit).
    ``reason`` says why the task splits there (shown in reports and the dispatch table).
    """

    dims: tuple[str, ...]
    classes: tuple[tuple[str, int | None], ...]
    reason: str
    inputs: tuple[tuple[int, int], ...] = ()

    def __post_init__(self) -> None:
        names = [name for name, _ in self.classes]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"regimes: names must be unique and non-empty: {names}")
        for name in names:
            if not REGIME_NAME.match(name):
                raise ValueError(f"regime name {name!r}: lower-case letters, digits, _")
        bounds = [bound for _, bound in self.classes]
        if bounds[-1] is not None or any(b is None for b in bounds[:-1]):
            raise ValueError("regimes: only the last class is unbounded (bound None)")
        finite = [b for b in bounds[:-1] if b is not None]  # all of them (checked above)
        if any(a >= b for a, b in zip(finite[:-1], finite[1:], strict=False)):
            raise ValueError(f"regimes: bounds must increase: {bounds}")
        if len(self.inputs) != len(self.dims):
            raise ValueError("regimes: one (input index, tensor dim) per dim")
        if not self.reason.strip():
            raise ValueError("regimes: say why the task splits there (reason)")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.classes)

    def of_value(self, value: int) -> str:
        for name, bound in self.classes:
            if bound is None or value <= bound:
                return name
        raise AssertionError("unreachable: the last class is unbounded")

    def rule(self) -> dict[str, Any]:
        """The JSON form an exported kernel's dispatch table carries."""
        return {"dims": list(self.dims), "inputs": [list(p) for p in self.inputs],
                "classes": [[n, b] for n, b in self.classes], "reason": self.reason}


SINGLE_REGIME = Regimes(dims=(), classes=(("all", None),), inputs=(),
                        reason="one regime: the task declares no split of its shapes")
