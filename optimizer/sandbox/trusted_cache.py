"""Kernels the project generates, compiled once per host and read by every evaluation.

Why: each judged evaluation gets a Triton cache of its own, because a cache a candidate
could write would be poisoned for the next one. So the same template kernel was compiled
again in every evaluation that ran it: the incumbent in every round of a loop, the naive
softmax in every A/A run, each seed re-measured. One compile of the naive softmax's
262,144-wide tile (the row past every list) took 55-62 s on an H100, each time.

How: code the project renders from its own template and knob values (``is_generated``)
is trusted, as the sweep trusts it. Before the worker starts, the runner compiles such a
candidate's and incumbent's foreseeable launches outside the jail (``fill``, in
processes of its own) into a host folder (``directory``). The jail shows that folder
read-only at ``JAIL_PATH``; the worker's Triton reads it through layered_cache.py and
writes only to the evaluation's own cache. Nothing the candidate runs can write the
shared layer, and nothing written in a jail is ever copied into it. The drawn shapes are
never compiled there: the layer is readable in the jail, and would show them.

``KERNELKB_TRUSTED_CACHE=0`` turns it off: every evaluation compiles all it runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelkb.kernels.config import header_constants
from kernelkb.kernels.shared.folders import user_cache

log = logging.getLogger(__name__)

SETTING = "KERNELKB_TRUSTED_CACHE"
LAYER_ENV = "KERNELKB_TRUSTED_TRITON_CACHE"  # the worker's: where the layer is in its jail
JAIL_PATH = "/kernelkb-trusted-triton"
# TRITON_CACHE_MANAGER's form, MODULE:CLASS
MANAGER = "kernelkb.optimizer.sandbox.layered_cache:LayeredCache"
MAX_PROCESSES = 15  # compiles are single-threaded; the GPU host has 16 cores
FILL_LIMIT_S = 180.0  # a fill past this is killed: the worker compiles what is missing
_DONE = "done"  # markers of the fills that completed, by what they compiled


def wanted() -> bool:
    """Whether evaluations share the trusted layer (on unless ``KERNELKB_TRUSTED_CACHE=0``)."""
    return os.environ.get(SETTING, "1").strip() not in ("0", "false", "no", "off")


def directory() -> Path:
    """The host's trusted layer: Triton's cache layout, under the user cache folder."""
    return user_cache() / "triton-trusted"


def is_generated(task: Any, source: str) -> bool:
    """Whether ``source`` is exactly what the task's template renders for the knob
    values it carries: the project's own code, byte for byte, each value one of its
    knob's own, of its type too (``4.0`` equals ``4`` and renders as itself: red team
    12)."""
    params = {p.name: p for p in getattr(task, "params", ())}
    config = {k: v for k, v in header_constants(source).items() if k in params}
    if not all(any(type(v) is type(a) and v == a for a in params[k].values)
               for k, v in config.items()):
        return False
    try:
        return bool(task.render(config) == source)
    except (KeyError, ValueError):  # a value off the space or an illegal combination
        return False


def jobs(task: Any, request: dict[str, Any], timed: list[tuple[int, ...]]
         ) -> list[tuple[str, list[int], str, bool]]:
    """What the worker will compile that can be compiled here: the generated candidate's
    checked shapes (with the input conditions where checked) and the judge's foreseen
    ones; the generated incumbent's ``timed`` shapes. (source, shape, dtype, conditioned)
    as sandbox/ahead.py takes them."""
    from kernelkb.optimizer.sandbox.judge import foreseen_shapes

    dtype, found = request["dtype"], []
    if is_generated(task, request["source"]):
        conditioned = bool(request.get("conditions", True))
        found += [(request["source"], list(s), dtype, conditioned) for s in request["shapes"]]
        found += [(request["source"], list(s), d, False)
                  for s, d in foreseen_shapes(task, request)]
    parent = request.get("parent_source")
    if parent and request.get("timing") and is_generated(task, parent):
        found += [(parent, list(s), dtype, False) for s in timed]
    return found


def _marker(task_name: str, order: list[tuple[str, list[int], str, bool]]) -> Path:
    """One file per fill that completed, named by all it compiled and the software and
    GPU that compiled it: a second evaluation of the same code skips the processes."""
    import torch
    import triton

    what = json.dumps([task_name, order, triton.__version__, torch.version.cuda,
                       torch.cuda.get_device_name() if torch.cuda.is_available() else ""])
    return directory() / _DONE / hashlib.sha256(what.encode()).hexdigest()


def fill(task_name: str, request: dict[str, Any], timed: list[tuple[int, ...]]
         ) -> dict[str, Any] | None:
    """Compile what ``jobs`` names into the trusted layer, in up to ``MAX_PROCESSES``
    processes outside the jail, and wait for them (at most ``FILL_LIMIT_S``); what was
    done, for the evaluation's artifacts (None: nothing generated to compile)."""
    from kernelkb.kernels.discovery import get_task

    order = jobs(get_task(task_name), request, timed)
    if not order:
        return None
    began = time.perf_counter()
    marker = _marker(task_name, order)
    # the sources whose compiles are all in the layer once this fill succeeds: the
    # worker's own compile-ahead processes leave them out (sandbox/ahead.py)
    covered = sorted({source for source, *_ in order})
    if marker.exists():
        return {"jobs": len(order), "compiled": False, "seconds": 0.0, "covered": covered}
    marker.parent.mkdir(parents=True, exist_ok=True)
    count = max(1, min(len(order), (os.cpu_count() or 2) - 1, MAX_PROCESSES))
    log.info("%s: compiling the project's own code outside the jail, %d launches in %d "
             "processes (once per host: %s)", task_name, len(order), count, directory())
    import kernelkb

    # the folder kernelkb is imported from, for a child started by module name
    root = str(Path(kernelkb.__file__).resolve().parents[1])
    env = {**os.environ, "TRITON_CACHE_DIR": str(directory()),
           "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    for name in ("TRITON_CACHE_MANAGER", LAYER_ENV):
        env.pop(name, None)  # this layer is written with Triton's own manager
    processes, files = [], []
    for n in range(count):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            # ahead.py's compile process, its watchers off: the code is the project's
            json.dump({"task": task_name, "task_origin": request.get("task_origin"),
                       "jobs": order[n::count], "refuse_introspection": False,
                       "refuse_surroundings": False}, handle)
        files.append(handle.name)
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "kernelkb.optimizer.sandbox.ahead", handle.name], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    deadline = time.monotonic() + FILL_LIMIT_S
    codes = []
    for process in processes:
        try:
            _, err = process.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
        codes.append(process.returncode)
        if process.returncode:
            log.info("trusted compile ended %s: %s", process.returncode,
                     err.decode(errors="replace")[-300:])
    for path in files:
        with contextlib.suppress(OSError):
            os.unlink(path)
    complete = all(code == 0 for code in codes)
    if complete:
        marker.touch()
    return {"jobs": len(order), "compiled": True, "processes": count,
            "failed": sum(code != 0 for code in codes),
            "seconds": round(time.perf_counter() - began, 1),
            "covered": covered if complete else []}

