"""Registers, spills and shared memory of the kernels a candidate compiled (GPU only).

A launched ``JITFunction`` keeps its compiled kernels per device. Triton 3.x stores them
in ``fn.device_caches[device]`` (a tuple whose first item is the key -> CompiledKernel
dict; 3.6 and 3.9 agree on that); older releases used ``fn.cache[device]``. A
``CompiledKernel`` loads its binary lazily, so ``n_regs`` / ``n_spills`` appear only
after ``_init_handles()``; shared memory is in ``metadata.shared``.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)


def jit_functions(module: ModuleType) -> list[Any]:
    """Triton JIT functions defined in a candidate module (autotuner wrappers unwrapped)."""
    from triton.runtime.jit import JITFunction

    found = []
    for value in vars(module).values():
        while not isinstance(value, JITFunction) and hasattr(value, "fn"):
            value = value.fn  # Autotuner / Heuristics wrap the JITFunction
        if isinstance(value, JITFunction) and value not in found:
            found.append(value)
    return found


def compiled_kernels(fn: Any) -> list[Any]:
    kernels: list[Any] = []
    caches = getattr(fn, "device_caches", None)
    if caches:
        for entry in caches.values():
            table = entry[0] if isinstance(entry, tuple) else entry
            if isinstance(table, dict):
                kernels.extend(table.values())
    legacy = getattr(fn, "cache", None)
    if isinstance(legacy, dict):
        for table in legacy.values():
            if isinstance(table, dict):
                kernels.extend(table.values())
    return kernels


def kernel_resources(module: ModuleType) -> dict[str, int | None]:
    """Worst case over compiled kernels: max registers, max spills, max shared bytes."""
    info: dict[str, int | None] = {"registers": None, "spills": None, "smem_bytes": None}
    for fn in jit_functions(module):
        for kernel in compiled_kernels(fn):
            try:
                if getattr(kernel, "n_regs", None) is None and hasattr(kernel, "_init_handles"):
                    kernel._init_handles()
                values = {
                    "registers": getattr(kernel, "n_regs", None),
                    "spills": getattr(kernel, "n_spills", None),
                    "smem_bytes": getattr(getattr(kernel, "metadata", None), "shared", None),
                }
            except Exception as err:  # metadata is best effort, never fails an evaluation
                log.warning("compiled kernel metadata unavailable: %s", err)
                continue
            for key, value in values.items():
                if isinstance(value, int):
                    current = info[key]
                    info[key] = value if current is None else max(current, value)
    return info
