"""Launch facts of a Kernel Tuner configuration, from Kernel Tuner's naming conventions.

Kernel Tuner kernels are CUDA / HIP sources the project cannot read, so this is
convention-based, not a reading of each kernel:

- ``block_size_x/y/z`` are the thread block's dimensions (absent: Kernel Tuner's default
  block of 256 x 1 x 1 only for x when no block size is tuned at all, else 1);
- ``tile_size_x/y/z`` multiply the work per thread along that dimension (the usual
  ``grid_div_x = ["block_size_x", "tile_size_x"]``), so one block produces
  prod(block x tile) outputs and the grid is prod(ceil(problem_size / (block x tile)));
- each output is one element of ``bytes_per_element`` (4: Kernel Tuner kernels are float
  unless told); the block's outputs are its register tile; a truthy parameter whose name
  says shared memory (``use_shmem``, ``use_smem``, ``shared_mem``...) stages that tile in
  shared memory as well (halos and padding are the kernel's and are not counted);
- ``vector``/``vec`` parameters give the vector width, ``loop_unroll_factor*`` / ``unroll``
  the unrolling (0 = the compiler's choice, counted as 1).

A kernel with its own names for these (``nthreads``, ``threads_per_block``,
``block_dim``, ``wg_size``; ``items_per_thread``, ``work_per_thread``, ``ept``...) is read by
those names when it tunes no ``block_size_*``: threads per block the product of the
thread-count parameters, work per thread the product of the per-thread ones, over the
whole problem size (``own_names_launch``).

CLBlast's GEMM vocabulary (CLBlast's own tuners and the GEMM of the BAT / Kernel Tuner
benchmark hubs) is read as what it means instead: ``MWG`` x ``NWG`` outputs per work-group
(``WGD`` x ``WGD`` for the direct kernel), ``MDIMC`` x ``NDIMC`` threads (``MDIMCD`` x
``NDIMCD``), ``KWG`` the K step, ``VWM``/``VWN`` vector widths, ``KWI`` the unroll, ``SA``/``SB``
the A and B tiles staged in local (shared) memory; the problem size is (M, N, K).

A kernel that breaks these conventions gets features that are wrong by its own factor;
the raw parameters (namespaced features) are kept beside them for that reason.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from kernelkb.kernels.shared.launch import Launch

_SHARED = re.compile(r"(shmem|smem|shared|lds)", re.I)
_VECTOR = re.compile(r"^(vector|vec)(_?size|_?width)?$|_vector$", re.I)
_UNROLL = re.compile(r"unroll", re.I)
_PROBLEM = re.compile(r"problem_size=([\dx]+)")
_THREADS = re.compile(r"^(n_?threads?|num_?threads|threads?(_per_(block|group|cta))?|"
                      r"block_?dim|block_?threads|wg_?size|work_?group_?size|local_?size|"
                      r"cta_?size)(_?[xyz])?$", re.I)
_PER_THREAD = re.compile(r"^((items|elements|elems|work|outputs|values)_?per_?thread|"
                         r"ept|ipt|wpt|vpt)(_?[xyz])?$", re.I)
AXES = ("x", "y", "z")


def parse_problem_size(label: str) -> tuple[int, ...]:
    """``problem_size=4096x4096`` (the importers' shape_set) -> (4096, 4096)."""
    match = _PROBLEM.search(label)
    if not match:
        raise ValueError(f"not a Kernel Tuner problem size: {label!r}")
    return tuple(int(v) for v in match.group(1).split("x") if v)


def _int(value: Any, default: int = 1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def kernel_tuner_launch(params: Mapping[str, Any], problem_size: Sequence[int],
                        bytes_per_element: int = 4) -> Launch:
    """The launch of one Kernel Tuner configuration on a problem size (see the module)."""
    clblast = clblast_gemm_launch(params, problem_size, bytes_per_element)
    if clblast is not None:
        return clblast
    tuned_blocks = any(f"block_size_{a}" in params for a in AXES)
    if not tuned_blocks:
        own = own_names_launch(params, problem_size, bytes_per_element)
        if own is not None:
            return own
    programs, outputs, threads, per_thread = 1, 1, 1, 1
    for i, axis in enumerate(AXES):
        block = _int(params.get(f"block_size_{axis}"), 256 if i == 0 and not tuned_blocks else 1)
        tile = max(1, _int(params.get(f"tile_size_{axis}"), 1))
        size = int(problem_size[i]) if i < len(problem_size) else 1
        programs *= max(1, math.ceil(size / (block * tile)))
        outputs *= block * tile
        threads *= block
        per_thread *= tile
    tile_bytes = outputs * bytes_per_element
    shared = any(_SHARED.search(k) and _int(v, 0) for k, v in params.items())
    vector = next((_int(v) for k, v in params.items() if _VECTOR.search(k)), 1)
    unroll = next((_int(v) for k, v in params.items() if _UNROLL.search(k)), 1)
    return Launch(programs=programs, threads_per_program=max(1, threads),
                  elements_per_program=outputs, bytes_per_element=bytes_per_element,
                  tile_bytes=tile_bytes, smem_bytes=tile_bytes if shared else 0,
                  vector_width=max(1, vector), unroll=max(1, unroll))


def own_names_launch(params: Mapping[str, Any], problem_size: Sequence[int],
                     bytes_per_element: int = 4) -> Launch | None:
    """A kernel's own names for threads per block and work per thread (see the module);
    None when it has neither."""
    threads = [_int(v) for k, v in params.items() if _THREADS.match(k)]
    work = [_int(v) for k, v in params.items() if _PER_THREAD.match(k)]
    if not threads and not work:
        return None
    block = max(1, math.prod(threads)) if threads else 256
    per_thread = max(1, math.prod(work)) if work else 1
    outputs = block * per_thread
    size = math.prod(int(v) for v in problem_size) if problem_size else 1
    tile_bytes = outputs * bytes_per_element
    shared = any(_SHARED.search(k) and _int(v, 0) for k, v in params.items())
    vector = next((_int(v) for k, v in params.items() if _VECTOR.search(k)), 1)
    unroll = next((_int(v) for k, v in params.items() if _UNROLL.search(k)), 1)
    return Launch(programs=max(1, math.ceil(size / outputs)), threads_per_program=block,
                  elements_per_program=outputs, bytes_per_element=bytes_per_element,
                  tile_bytes=tile_bytes, smem_bytes=tile_bytes if shared else 0,
                  vector_width=max(1, vector), unroll=max(1, unroll))


# (outputs per work-group in M and N, threads in M and N, K step, vectors, unroll) names
# of CLBlast's two GEMM kernels: the tiled one, then the direct one
_CLBLAST = (("MWG", "NWG", "MDIMC", "NDIMC", "KWG", ("VWM", "VWN"), "KWI"),
            ("WGD", "WGD", "MDIMCD", "NDIMCD", "WGD", ("VWMD", "VWND"), "KWID"))


def clblast_gemm_launch(params: Mapping[str, Any], problem_size: Sequence[int],
                        bytes_per_element: int = 4) -> Launch | None:
    """The launch of a configuration in CLBlast's GEMM vocabulary (see the module); None
    for any other vocabulary."""
    names = {k.upper(): v for k, v in params.items()}
    vocabulary = next((v for v in _CLBLAST if all(n in names for n in v[:4])), None)
    if vocabulary is None:
        return None
    mwg, nwg, mdim, ndim, kwg, vectors, unroll = vocabulary
    tile_m, tile_n = max(1, _int(names[mwg])), max(1, _int(names[nwg]))
    step = max(1, _int(names.get(kwg), 1))
    m = int(problem_size[0]) if problem_size else 1
    n = int(problem_size[1]) if len(problem_size) > 1 else 1
    staged = (tile_m * step if _int(names.get("SA"), 0) else 0) + \
        (step * tile_n if _int(names.get("SB"), 0) else 0)
    if mwg == "WGD":  # the direct kernel always stages both tiles
        staged = (tile_m + tile_n) * step
    return Launch(
        programs=max(1, math.ceil(m / tile_m)) * max(1, math.ceil(n / tile_n)),
        threads_per_program=max(1, _int(names[mdim]) * _int(names[ndim])),
        elements_per_program=tile_m * tile_n, bytes_per_element=bytes_per_element,
        tile_bytes=tile_m * tile_n * bytes_per_element,
        smem_bytes=staged * bytes_per_element,
        vector_width=max(1, *(_int(names.get(v), 1) for v in vectors)),
        unroll=max(1, _int(names.get(unroll), 1)))


def config_launch(config: Mapping[str, Any], shape: str) -> Launch | None:
    """``launch_of_config`` for an op with no task: a configuration on the problem size in
    a shape label. None when the label carries no problem size."""
    try:
        size = parse_problem_size(shape)
    except ValueError:
        return None
    return kernel_tuner_launch(config, size)


def record_launch(record: Any, shape: str) -> Launch | None:
    """``launch_of`` for imported Kernel Tuner records: config + problem size in the shape
    label (task.shape_set). None when the label carries no problem size."""
    return config_launch(record.edit.config, shape)
