"""An out-of-bounds guard for Triton's CPU interpreter.

TRITON_INTERPRET=1 turns every tl.load / tl.store into a raw host memory access; an
access a few elements past a tensor reads the neighbouring heap silently (measured on
triton 3.9: a mask dropped on a 7-column row returns garbage and raises nothing). The
guard records the storage ranges of every tensor passed to a kernel launch and checks
each active (unmasked) address of each load and store against them, so the planted
"mask removed" kernel is reported as an illegal memory access instead of a wrong number.

It patches two interpreter internals; if a Triton version lacks them the guard is
skipped with a warning (the GPU path never uses it).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from kernelkb.optimizer.sandbox.errors import OutOfBoundsAccess

log = logging.getLogger(__name__)

_ranges: list[tuple[int, int]] = []  # [start, end) byte ranges of the current launch


def install() -> bool:
    """Patch the interpreter; returns False when this Triton has no known hook points."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a hard dependency
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    executor = getattr(interpreter, "GridExecutor", None)
    needed = (
        (builder, "create_masked_load"), (builder, "create_masked_store"),
        (executor, "_init_args_hst"),
    )
    if any(owner is None or not hasattr(owner, name) for owner, name in needed):
        log.warning("bounds guard: this triton has no interpreter hooks; OOB goes unseen")
        return False
    _patch_launch(executor)
    _patch_memory_ops(builder)
    return True


def _patch_launch(executor: Any) -> None:
    original = executor._init_args_hst

    def init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = original(self, args_dev, kwargs)
        _ranges.clear()
        for arg in (*args_hst, *kwargs_hst.values()):
            _record(arg)
        return args_hst, kwargs_hst

    executor._init_args_hst = init_args_hst


def _record(arg: Any) -> None:
    if isinstance(arg, tuple):
        for item in arg:
            _record(item)
        return
    base = getattr(arg, "base", None)  # a TensorDescriptor wraps its tensor
    if base is not None and hasattr(base, "untyped_storage"):
        arg = base
    if hasattr(arg, "untyped_storage"):
        storage = arg.untyped_storage()
        _ranges.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))


def _patch_memory_ops(builder: Any) -> None:
    load, store = builder.create_masked_load, builder.create_masked_store

    def create_masked_load(self: Any, ptrs: Any, mask: Any, other: Any, *args: Any,
                           **kwargs: Any) -> Any:
        _check(ptrs.data, mask.data, _element_size(ptrs), "load")
        return load(self, ptrs, mask, other, *args, **kwargs)

    def create_masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any,
                            **kwargs: Any) -> Any:
        _check(ptrs.data, mask.data, np.asarray(value.data).itemsize, "store")
        return store(self, ptrs, value, mask, *args, **kwargs)

    builder.create_masked_load = create_masked_load
    builder.create_masked_store = create_masked_store


def _element_size(ptrs: Any) -> int:
    try:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    except AttributeError:
        return 1


def _check(addresses: np.ndarray, mask: np.ndarray, size: int, what: str) -> None:
    if not _ranges:
        return
    active = np.broadcast_to(np.asarray(addresses), np.shape(mask))[np.asarray(mask, bool)]
    if active.size == 0:
        return
    active = active.astype(np.uint64)
    inside = np.zeros(active.shape, dtype=bool)
    for start, end in _ranges:
        inside |= (active >= start) & (active + size <= end)
    if not inside.all():
        bad = int(np.count_nonzero(~inside))
        first = int(active[~inside][0])
        nearest = min(_ranges, key=lambda r: min(abs(first - r[0]), abs(first - r[1])))
        after = first >= nearest[1]
        gap = first - nearest[1] if after else nearest[0] - first
        offset = gap // size + 1 if after else -(-gap // size)
        side = "past the end of" if after else "before"
        raise OutOfBoundsAccess(
            f"out-of-bounds {what}: {bad} of {active.size} active addresses fall outside every "
            f"tensor argument (the first {offset} element(s) {side} the nearest tensor); "
            "a mask is missing or wrong"
        )
