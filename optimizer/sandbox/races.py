"""Plain stores of two programs of one launch to one address, seen in the CPU interpreter.

The interpreter runs a launch's programs one at a time, so a read-modify-write that two
programs make on one address with a plain ``tl.load`` and ``tl.store`` (a cross-program
sum without ``tl.atomic_add``) is whole there, in any order, and right on every CPU
check. On a GPU those programs run at once and all but one update are lost. Under the
CUDA memory model two non-atomic stores of different programs to one address are a data
race whatever is stored, so the rule needs no knowledge of the kernel: each launch's
plain stores are recorded per program, and a store to an address an earlier program of
the same launch stored to raises ``DataRace``. Atomics are not stores here; a program
storing twice to its own addresses is no race; loads are not recorded (a split-K
reduction reads other programs' partials after an atomic counter, legally).

Interpreter only, installed beside the bounds guard; skipped with a warning where this
Triton lacks the hooks.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from kernelkb.optimizer.sandbox.errors import DataRace

log = logging.getLogger(__name__)


class _Stores:
    """The addresses the current launch's programs stored to: the earlier programs', and
    the running program's."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.earlier: set[int] = set()
        self.current: set[int] = set()
        self.program: tuple[int, ...] | None = None

    def add(self, program: tuple[int, ...], addresses: list[int]) -> None:
        if program != self.program:
            self.earlier |= self.current
            self.current, self.program = set(), program
        if not self.earlier.isdisjoint(addresses):
            raise DataRace(
                f"data race: program {program} stored to an address another program of "
                "the same launch stored to, with plain stores (no atomic): on a GPU the "
                "programs run at once and one of the two writes is lost; use "
                "tl.atomic_add (or another atomic) for an update several programs make, "
                "or give each program its own slot")
        self.current.update(addresses)


_STORES = _Stores()


def install() -> bool:
    """Record each launch's plain stores; False (with a warning) without the hooks."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a hard dependency
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    executor = getattr(interpreter, "GridExecutor", None)
    if builder is None or executor is None or not hasattr(builder, "create_masked_store") \
            or not hasattr(executor, "_init_args_hst"):
        log.warning("data races: this triton has no interpreter hooks; races go unseen")
        return False
    start, store = executor._init_args_hst, builder.create_masked_store

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        _STORES.reset()  # a new launch
        return start(self, args_dev, kwargs)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any,
                            **kwargs: Any) -> Any:
        addresses = np.broadcast_to(np.asarray(ptrs.data), np.shape(mask.data))
        active = addresses[np.asarray(mask.data, bool)]
        if active.size:
            _STORES.add(tuple(getattr(self, "grid_idx", ())), np.unique(active).tolist())
        return store(self, ptrs, value, mask, *args, **kwargs)

    executor._init_args_hst = init_args_hst
    builder.create_masked_store = create_masked_store
    return True
