"""Plain stores of two programs of one launch to one address, seen in the CPU interpreter.

The interpreter runs a launch's programs one at a time, so a read-modify-write that two
programs make on one address with a plain ``tl.load`` and ``tl.store`` (a cross-program
sum without ``tl.atomic_add``) is whole there, in any order, and right on every CPU
check. On a GPU those programs run at once and all but one update are lost. Under the
CUDA memory model two non-atomic stores of different programs to one address are a data
race whatever is stored, so the rule needs no knowledge of the kernel: each launch's
plain stores are recorded per program, and a store to an address an earlier program of
the same launch stored to raises ``DataRace``. A program storing twice to its own
addresses is no race; loads are not recorded (a split-K reduction reads other programs'
partials after an atomic counter, legally). Two more forms the interpreter hides:

- lanes of one store to one address with different values: the interpreter lands the
  last lane, a GPU any of them;
- ``atomic_xchg`` of different values by two programs to one address: an exchange does
  not combine, so it is a store as far as the race goes (a sum read with an atomic and
  written back with an exchange loses updates); the same value (a counter reset to 0)
  is no race. Adds, maxima and compare-and-swap combine and are not recorded.

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
        self.exchanged: dict[int, tuple[tuple[int, ...], Any]] = {}
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

    def exchange(self, program: tuple[int, ...], addresses: np.ndarray,
                 values: np.ndarray) -> None:
        """An ``atomic_xchg``'s active lanes: a race where another program of the launch
        exchanged another value at one of these addresses."""
        for address, value in zip(addresses.tolist(), values.tolist(), strict=True):
            before = self.exchanged.get(address)
            if before is not None and before[0] != program and not _same(before[1], value):
                raise DataRace(
                    f"data race: program {program} exchanged a value at an address program "
                    f"{before[0]} of the same launch exchanged another value at "
                    "(tl.atomic_xchg): an exchange does not combine, so on a GPU one "
                    "update is lost; use tl.atomic_add for a sum several programs make")
            self.exchanged[address] = (program, value)


def _same(a: Any, b: Any) -> bool:
    return bool(a == b or (a != a and b != b))  # NaN == NaN here


def _lanes_agree(addresses: np.ndarray, values: np.ndarray) -> bool:
    """Whether lanes of one store that hit one address store one value."""
    if np.unique(addresses).size == addresses.size:
        return True
    order = np.argsort(addresses, kind="stable")
    a, v = addresses[order], values[order]
    same_place = a[1:] == a[:-1]
    differ = v[1:] != v[:-1]
    if np.issubdtype(v.dtype, np.floating):
        differ &= ~(np.isnan(v[1:]) & np.isnan(v[:-1]))
    return not bool((same_place & differ).any())


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
    rmw: Any = getattr(builder, "create_atomic_rmw", None)
    xchg = getattr(getattr(getattr(interpreter, "_interpreter", None), "RMW_OP", None),
                   "XCHG", None)

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        _STORES.reset()  # a new launch
        return start(self, args_dev, kwargs)

    def lanes(ptrs: Any, value: Any, mask: Any) -> tuple[np.ndarray, np.ndarray]:
        shape = np.shape(mask.data)
        on = np.broadcast_to(np.asarray(mask.data, bool), shape)
        return (np.broadcast_to(np.asarray(ptrs.data), shape)[on],
                np.broadcast_to(np.asarray(value.data), shape)[on])

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any,
                            **kwargs: Any) -> Any:
        addresses, values = lanes(ptrs, value, mask)
        if addresses.size:
            program = tuple(getattr(self, "grid_idx", ()))
            if not _lanes_agree(addresses, values):
                raise DataRace(
                    f"data race: lanes of one store of program {program} write different "
                    "values to one address: the interpreter lands the last lane, a GPU "
                    "any of them; reduce the block first (tl.sum, tl.max) and store the "
                    "result")
            _STORES.add(program, np.unique(addresses).tolist())
        return store(self, ptrs, value, mask, *args, **kwargs)

    def create_atomic_rmw(self: Any, op: Any, ptr: Any, val: Any, mask: Any, *args: Any,
                          **kwargs: Any) -> Any:
        if self.ir_rmw_op_to_interpreter_rmw_op.get(op) == xchg:
            addresses, values = lanes(ptr, val, mask)
            if addresses.size:
                _STORES.exchange(tuple(getattr(self, "grid_idx", ())), addresses, values)
        return rmw(self, op, ptr, val, mask, *args, **kwargs)

    executor._init_args_hst = init_args_hst
    builder.create_masked_store = create_masked_store
    if rmw is not None and xchg is not None:
        builder.create_atomic_rmw = create_atomic_rmw
    else:
        log.warning("data races: this triton's interpreter has no atomic hook; exchanges "
                    "go unseen")
    return True
