"""Compile a kernel's launches ahead, on other cores, so that its checks find Triton's
cache warm.

Why: most of a judged evaluation's wall time on a GPU is Triton compiling, one kernel
after another on one core, while the other cores wait. Each shape and input condition a
check runs is a new specialisation (another block size, another divisibility), and a
softmax that keeps a long row in registers takes seconds to build: the naive softmax
timed out the 60 s budget on a cold cache on an H100, 46 s of it in the worker's checks.

How: the launches a ``run`` makes are compiled in Triton's warm-up mode (the kernel is
built and written to the cache, never launched) on meta tensors (sizes, strides and
dtypes, no memory). A wrapper that reads values (``.item()``) compiles nothing ahead; its
check compiles it as before. Under the CPU interpreter nothing is compiled, so nothing is
done.

Two users: the sweep (optimizer/compile_ahead.py) compiles the next plan's
configurations while the GPU times this one; the worker (``Ahead``) starts a few
processes before it loads the candidate, each compiling some of the shapes it will check
(from the last, while it checks from the first) and the incumbent's timed shapes. Those
processes are the worker's: the same jail, cgroup and uid, started before any candidate
code runs in the worker, sharing only the evaluation's own Triton cache. They run the
candidate's import and its wrapper on meta tensors with the source rules already passed
and the worker's audit-hook watchers armed (introspection, surroundings; a process
whose watcher fires exits ``REFUSED`` and the worker refuses the candidate), hold no
descriptor of the judge's or the runner's, and are killed before the worker's first
timed call and before its final report.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from kernelkb.kernels.base import Shape
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task, load_origin
from kernelkb.kernels.dtypes import DTYPES

log = logging.getLogger(__name__)

SETTING = "KERNELKB_COMPILE_AHEAD"  # 0: the worker compiles each shape as it checks it
MAX_PROCESSES = 8  # each holds torch and Triton (~0.5 GiB): the cgroup's memory is shared
# after its checks the worker waits this long at most for the judge's foreseen shapes
WAIT_S = 90.0
REFUSED = 3  # a process's exit code: the candidate reached past the rules there
_INPUTS: dict[tuple[str, str, Shape, str], tuple[Any, ...]] = {}  # a process's, by shape
_MODULES: dict[str, Any] = {}  # a process's loaded sources


def wanted() -> bool:
    """Whether judged evaluations compile ahead (on unless ``KERNELKB_COMPILE_AHEAD=0``)."""
    return os.environ.get(SETTING, "1").strip() not in ("0", "false", "no", "off")


def warm_up_launches() -> None:
    """This process: every ``kernel[grid](...)`` compiles and returns, launching nothing;
    a wrapper asking the properties of its input's device (a persistent kernel's SM
    count) gets the GPU's, not an error for the meta device."""
    import torch
    from triton.runtime.jit import KernelInterface

    def compile_only(self: Any, grid: Any) -> Any:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=True, **kwargs)

    properties = torch.cuda.get_device_properties

    def of_the_gpu(device: Any = None) -> Any:
        meta = device == "meta" or getattr(device, "type", None) == "meta"
        return properties(None if meta else device)

    KernelInterface.__getitem__ = compile_only  # type: ignore[method-assign]
    torch.cuda.get_device_properties = of_the_gpu  # type: ignore[assignment]
    torch.set_num_threads(1)  # the cores are the other processes'
    logging.basicConfig(level=logging.WARNING)


def _meta(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype,
                                   device="meta")
    return value


@contextlib.contextmanager
def meta_generators() -> Iterator[None]:
    """``torch.Generator(device="meta")`` as a CPU generator: a task's ``make_inputs``
    seeds one on its device, which the meta device has not, and meta tensors ignore it."""
    import torch

    real = torch.Generator

    class Generator:  # a class, not a function: annotations write `torch.Generator | None`
        def __new__(cls, device: Any = "cpu") -> Any:
            return real(device="cpu" if str(device) == "meta" else device)

    torch.Generator = Generator  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        torch.Generator = real  # type: ignore[misc]


def made(task_name: str, dtype: str, shape: Shape, condition: str, device: str
         ) -> tuple[Any, ...]:
    """The check's inputs for ``shape`` under ``condition`` ("plain" or a condition's
    name) on ``device``."""
    task = get_task(task_name)
    base = task.make_inputs(shape, DTYPES[dtype], 0, device)
    if condition == "plain":
        return tuple(base)
    return tuple(next(c.apply(base, 0) for c in task.input_conditions if c.name == condition))


def meta_inputs(task_name: str, dtype: str, shape: Shape, condition: str) -> tuple[Any, ...]:
    """``made`` as meta tensors (sizes and strides are what a compile reads), made on the
    meta device (no memory, no time); where a condition needs values, made on the CPU
    once per process and then described."""
    wanted = (task_name, dtype, shape, condition)
    if wanted not in _INPUTS:
        try:
            with meta_generators():
                _INPUTS[wanted] = made(task_name, dtype, shape, condition, "meta")
        except Exception:  # noqa: BLE001 - the condition reads values: make them
            _INPUTS[wanted] = tuple(_meta(x) for x in
                                    made(task_name, dtype, shape, condition, "cpu"))
    return _INPUTS[wanted]


def compile_source(task_name: str, dtype: str, source: str, shapes: list[Shape],
                   condition_shapes: list[Shape]) -> int:
    """Every launch a check of ``source`` on ``shapes`` will make (and under every input
    condition on ``condition_shapes``), compiled and cached; returns how many calls of
    ``run`` compiled through (a call that needs values is skipped)."""
    task = get_task(task_name)
    if source not in _MODULES:
        try:  # named as the worker names it: a source that reads its own name sees one
            _MODULES[source] = load_candidate(source, "candidate")
        except Exception:  # noqa: BLE001 - the check says what is wrong with it
            _MODULES[source] = None
    module = _MODULES[source]
    if module is None:
        return 0
    through = 0
    for shape in shapes:
        cases = ["plain"]
        if shape in condition_shapes:
            cases += [c.name for c in task.input_conditions]
        for case in cases:
            try:
                module.run(*meta_inputs(task_name, dtype, shape, case))
                through += 1
            except Exception:  # noqa: BLE001, S112 - values needed: the check compiles it
                continue
    return through


class Ahead:
    """One evaluation's compile-ahead processes (see the module's docstring)."""

    def __init__(self, request: dict[str, Any], shapes: list[Shape],
                 timed_shapes: list[Shape], foreseen: list[tuple[Shape, str]]) -> None:
        """``foreseen``: the judge's new (shape, dtype) pairs that the lists name
        (judge.foreseen_shapes), first (a shape past every list is the dearest compile);
        then the candidate's checked shapes from the last (the worker checks from the
        first, and compiles its first shape itself), each with the input conditions when
        the check has them; then the incumbent's timed shapes, plain."""
        conditions = bool(request.get("conditions", True))
        source, dtype = request["source"], request["dtype"]
        jobs = [(source, list(shape), other, False) for shape, other in foreseen]
        jobs += [(source, list(shape), dtype, conditions) for shape in reversed(shapes[1:])]
        if request.get("parent_source") and request.get("timing"):
            jobs += [(request["parent_source"], list(shape), dtype, False)
                     for shape in timed_shapes]
        # what the runner compiled outside the jail into the trusted layer (generated
        # code, trusted_cache.py) is read from there: nothing to compile here
        done = set(request.get("compiled_trusted") or ())
        jobs = [job for job in jobs if job[0] not in done]
        cores = len(os.sched_getaffinity(0)) - 1
        count = max(0, min(len(jobs), cores, MAX_PROCESSES))
        self.began = time.perf_counter()
        self.jobs = len(jobs)
        self.processes: list[subprocess.Popen[bytes]] = []
        self.orders: list[str] = []
        for n in range(count):
            order = {"task": request["task"], "task_origin": request.get("task_origin"),
                     "jobs": jobs[n::count],
                     **{k: request.get(k, True) for k in ("refuse_introspection",
                                                          "refuse_surroundings")}}
            with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
                json.dump(order, handle)  # a file, not a pipe: a long source would block
            self.orders.append(handle.name)
            self.processes.append(subprocess.Popen(
                [sys.executable, "-m", "kernelkb.optimizer.sandbox.ahead", handle.name],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, close_fds=True))

    def stop(self, wait_s: float = 0.0) -> dict[str, Any]:
        """Wait up to ``wait_s`` for the processes to finish (what they compile the
        judge's questions need next), kill what is still compiling (the checks or the
        judge's questions compile it) and reap every process; what was done, for the
        worker's report."""
        deadline = time.monotonic() + wait_s
        while any(p.poll() is None for p in self.processes) and time.monotonic() < deadline:
            time.sleep(0.05)
        finished = sum(p.poll() in (0, REFUSED) for p in self.processes)
        refused = sum(p.poll() == REFUSED for p in self.processes)
        for child in self.processes:
            if child.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGKILL)
        for child in self.processes:
            child.wait()
        for path in self.orders:
            with contextlib.suppress(OSError):
                os.unlink(path)
        summary = {"processes": len(self.processes), "finished": finished, "jobs": self.jobs,
                   "refused": refused, "seconds": round(time.perf_counter() - self.began, 1)}
        self.processes, self.orders = [], []
        return summary


def _main() -> int:
    """A compile-ahead process: read its order from the file named, arm the worker's own
    watchers over the candidate's frames (introspection.py, surroundings.py), compile,
    exit; ``REFUSED`` where a watcher saw the candidate reach past the rules."""
    from kernelkb.optimizer.sandbox import import_path, introspection, surroundings

    import_path.drop_start_folder()  # its folder is the worker's, which it writes
    with open(sys.argv[1]) as handle:
        order = json.load(handle)
    warm_up_launches()
    load_origin(order.get("task_origin"))

    def is_candidate(path: str) -> bool:
        return os.path.basename(path) == "candidate.py"

    watchers: list[Any] = []
    if order.get("refuse_introspection", True):
        watchers.append(introspection.watch(is_candidate, module_name="candidate"))
    if order.get("refuse_surroundings", True):
        watchers.append(surroundings.watch(is_candidate))
    for source, shape, dtype, conditioned in order["jobs"]:
        shape = tuple(shape)
        compile_source(order["task"], dtype, source, [shape], [shape] if conditioned else [])
        if any(w.problem() for w in watchers):
            return REFUSED
    return 0


if __name__ == "__main__":
    sys.exit(_main())
