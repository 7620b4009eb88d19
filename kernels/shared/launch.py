"""A configuration's launch facts: the one description of how a configuration runs a
shape that the tasks write (``Task.launch``, kernels/base.py), retrieval derives for
Kernel Tuner data (retrieval/launch.py) and the learned ranker reads (retrieval/features.py)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Launch:
    """How one configuration runs a shape, in units that mean the same for every task and
    GPU: what the learned ranker (retrieval/features.py) derives its features from.

    programs: grid size (all launches of the op together); threads_per_program: warps x 32
    for Triton; elements_per_program: output elements (work) one program produces;
    bytes_per_element: of the data type; tile_bytes: the on-chip working set of one program
    (registers and shared memory, fp32 accumulators counted at 4 bytes); smem_bytes: the
    part of it staged in shared memory; num_stages: software-pipelining depth (1 = none);
    vector_width: contiguous elements one thread loads per access; unroll: loop unrolling
    (1 = none); programs_per_sm_cap: a persistent grid launches at most this many programs
    per SM (0 = no cap; the cap needs the GPU's SM count, so features apply it);
    launches: kernels one call launches (a split reduction summed by a second kernel is 2:
    at small sizes a launch costs as much as the work); reduction_splits: programs that
    share one output's reduction (split-K, split-KV), 1 = each output reduced by one.
    """

    programs: int
    threads_per_program: int
    elements_per_program: float
    bytes_per_element: int
    tile_bytes: int
    smem_bytes: int = 0
    num_stages: int = 1
    vector_width: int = 1
    unroll: int = 1
    programs_per_sm_cap: int = 0
    launches: int = 1
    reduction_splits: int = 1

    def __post_init__(self) -> None:
        if self.programs < 1 or self.threads_per_program < 1 or self.elements_per_program <= 0:
            raise ValueError(f"launch needs programs, threads and work >= 1: {self}")

    @classmethod
    def of(cls, launch: Any) -> Launch:
        """A Launch itself, or one copied from any object with its attributes (a user
        task's own launch type); an attribute it lacks takes the field's default."""
        if isinstance(launch, cls):
            return launch
        return cls(**{f.name: getattr(launch, f.name) for f in fields(cls)
                      if hasattr(launch, f.name)})


# -- the arithmetic a task's launch is written with (Task.launch, generic_launch) --------
def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_pow2(n: int) -> int:
    """triton.next_power_of_2, without triton (this runs in retrieval tests too)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def vector_width(elements: int, threads: int, bytes_per_element: int) -> int:
    """Contiguous elements per thread and access: a tile spread over the threads, at most
    16 bytes (one 128-bit load)."""
    return max(1, min(elements // max(1, threads), 16 // bytes_per_element))

