"""The CPU interpreter without the guarantee a GPU never gives: program order.

Triton's interpreter runs a launch's programs one after another, in order. A kernel
whose programs hand each other data without a barrier (program 0 stages a weight the
others read) is then right on every CPU check and garbage on a GPU, where programs run
at once and in any order. So in the interpreter each launch runs its programs in a
shuffled order (every program id still once, program 0 never first). What the others
then read is what the checked call's fresh allocations hold: a random draw, put there
by the provenance tracker in every checked call (``provenance.py``), not the previous
call's identical buffer. No global mode changes, so nothing tells the candidate it runs
here rather than in a user's interpreter.

A kernel whose program spins on a flag another program sets (a lock, a stream-K
hand-off) waits here for as long as that program has not run yet, and times out: it
relies on every program being resident at once, which a GPU gives only for grids that
fit it, and it is refused like one that assumes order.

For the interpreter only: the hardware already runs programs in its own order.
"""

from __future__ import annotations

import logging
import random
from typing import Any

log = logging.getLogger(__name__)


def install() -> bool:
    """Shuffle the interpreter's program order; False (with a warning) when this Triton
    lacks the hook."""
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - triton is a hard dependency
        return False
    builder = getattr(interpreter, "InterpreterBuilder", None)
    if builder is None or not all(hasattr(builder, name)
                                  for name in ("set_grid_idx", "set_grid_dim")):
        log.warning("program order: this triton has no interpreter hook; programs run "
                    "in order")
        return False
    _patch(builder)
    return True


def _patch(builder: Any) -> None:
    set_dim, set_idx = builder.set_grid_dim, builder.set_grid_idx
    launches = random.Random(0x5EED)

    def set_grid_dim(self: Any, nx: int, ny: int, nz: int) -> None:
        set_dim(self, nx, ny, nz)
        self._kernelkb_order = _order(nx * ny * nz, launches.getrandbits(32))

    def set_grid_idx(self: Any, x: int, y: int, z: int) -> None:
        nx, ny, nz = self.grid_dim
        order = getattr(self, "_kernelkb_order", None)
        if order is not None and len(order) == nx * ny * nz:
            x, rest = divmod(order[(x * ny + y) * nz + z], ny * nz)
            y, z = divmod(rest, nz)
        set_idx(self, x, y, z)

    builder.set_grid_dim, builder.set_grid_idx = set_grid_dim, set_grid_idx


def _order(programs: int, seed: int) -> list[int]:
    """A permutation of the programs in which program 0 (the one most often made to
    stage something for the others) never runs first."""
    order = list(range(programs))
    random.Random(seed).shuffle(order)
    if programs >= 2 and order[0] == 0:
        order[0], order[-1] = order[-1], order[0]
    return order
