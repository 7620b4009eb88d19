"""Calls the candidate may not make: starting threads, stepping out of the dispatch mode
or reading it, switching the GPU clock, launching GPU work that neither the mode nor the
launch tracking sees.

Why: the dispatch mode that records every torch op (provenance.py) sees only the thread it
runs on, and only while it is on the stack. A candidate could compute its answer with
torch on another thread, have a thread started at import finish the output after
``run()`` returned, or run torch with the mode disabled or popped and copy the result out
with a kernel; the tamper check compares what the harness holds and sees none of it. A
Triton kernel's wrapper has no use for any of these, so the rule is plain: the candidate
makes none of these calls.

How it is seen, checked after the import and after every call:

* the thread starters (``_thread.start_new_thread`` and the aliases ``threading`` holds)
  and the ways out of the mode (``torch._C._DisableTorchDispatch``, the dispatch stack's
  pop and unset, ``torch.utils._python_dispatch``'s temporary pops) are replaced, before
  the candidate is imported, by recorders. A call is the candidate's when the innermost
  frame outside the standard library's thread machinery (threading, concurrent.futures,
  multiprocessing, queue) is in the candidate's file; one made inside a library the
  candidate called (Triton compiling on a first launch, torch's own use of a pop) is the
  harness's;
* a Python thread alive that was neither there before the import nor started by the
  harness counts too: a start through a starter the candidate kept from before the
  recorder (its closure, ``gc``) is still a running thread;
* the readers of the dispatch mode stack are refused outright (they raise): the mode
  on the stack is the tracker, and a candidate holding it could read which call is the
  counterfactual one or switch its recording off around a torch op;
* so are the GPU clock's controls (the torch profiler's enable, disable and collection
  toggle; the CUPTI bindings' activity switches, flushes and callbacks): off, or
  flushed into the candidate's own callback, the GPU's timestamps (kernel_clock.py)
  would miss the work under the clock;
* GPU work launched past both: a CUDA graph's capture and replay (torch.softmax captured
  on an empty buffer computes nothing the mode would call data; replayed after the data
  is copied in, it computes the answer where nothing records it), and jiterator kernels,
  compiled and launched from C++. Both the Python entry points and the C ones beneath
  them are recorded; a call is the candidate's when the innermost frame outside torch,
  Triton and the thread machinery is in its file, so the harness's own CUDA-graph
  timing (through triton.testing) stays allowed;
* a kernel that reads the GPU's clock or the process (clock_reads.py), from its IR
  before it is loaded on a GPU, from the candidate's source at its first launch under
  the interpreter;
* a candidate's kernel whose address offsets may wrap in 32 bits (narrow_addresses.py:
  a product of two run-time values, a value carried round a loop, ...), from its TTIR
  before it is loaded on a GPU, from the same frontend run on the launch's argument
  types under the interpreter. It is a fault, not
  a cheat: the evaluation fails at compile, and a candidate that catches the refusal
  is still failed after its call.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from kernelkb.optimizer.sandbox import clock_reads, handed, narrow_addresses
from kernelkb.optimizer.sandbox.provenance import RULE

# the names a thread start can go through: _thread's own, and the aliases threading took
# at its import (Python 3.11-3.12: _start_new_thread; 3.13: start_joinable_thread)
_STARTERS = (("_thread", "start_new_thread"), ("_thread", "start_joinable_thread"),
             ("threading", "_start_new_thread"), ("threading", "_start_joinable_thread"))
# ways to run torch ops that the dispatch mode does not see
_MODE_EXITS = (("torch._C", "_DisableTorchDispatch"), ("torch._C", "_DisablePythonDispatcher"),
               ("torch._C", "_pop_torch_dispatch_stack"), ("torch._C", "_unset_dispatch_mode"),
               ("torch.utils._python_dispatch", "_pop_mode_temporarily"),
               ("torch.utils._python_dispatch", "_disable_current_modes"),
               ("torch.utils._python_dispatch", "_pop_mode"),
               # dispatch keys dropped or forced, or an op sent below the Python key
               ("torch._C", "_ExcludeDispatchKeyGuard"), ("torch._C", "_ForceDispatchKeyGuard"),
               ("torch._ops.OpOverload", "redispatch"))
# reads of the dispatch mode stack: what is on it while run() is recorded is the
# evaluator's tracker, whose flags say which call is the counterfactual one and whether
# torch work is recorded (the alias _python_dispatch keeps of torch._C's reader too)
_MODE_READS = (("torch.utils._python_dispatch", "_get_current_dispatch_mode"),
               ("torch.utils._python_dispatch", "_get_current_dispatch_mode_stack"),
               ("torch.utils._python_dispatch", "_get_dispatch_stack_at"),
               ("torch._C", "_get_dispatch_stack_at"), ("torch._C", "_get_dispatch_mode"))
# GPU work launched where neither the dispatch mode nor the launch tracking sees it
_UNSEEN_GPU_WORK = ("torch.cuda.graphs.CUDAGraph.capture_begin",
                    "torch.cuda.graphs.CUDAGraph.replay", "torch._C._CUDAGraph.capture_begin",
                    "torch._C._CUDAGraph.replay", "torch.cuda.jiterator._create_jit_fn",
                    "torch.cuda.jiterator._create_multi_output_jit_fn",
                    "torch._C._cuda_jiterator_compile_and_launch_kernel")
# the GPU clock's controls (kernel_clock.py): switching the evaluator's timestamps off,
# toggling their collection, or taking their records would hide the GPU work under the
# clock; refused like the reads above. The torch profiler's, in every module that holds
# them, and the CUPTI bindings' where installed
_PROFILER_CONTROLS = ("_enable_profiler", "_disable_profiler", "_prepare_profiler",
                      "_enable_profiler_legacy", "_disable_profiler_legacy",
                      "_toggle_collection_dynamic")
_CUPTI_CONTROLS = ("activity_enable", "activity_disable", "activity_enable_context",
                   "activity_disable_context", "activity_register_callbacks",
                   "activity_flush_all", "activity_flush_period", "activity_enable_and_dump",
                   "subscribe", "subscribe_v2", "unsubscribe", "finalize", "enable_callback",
                   "enable_domain", "enable_all_domains")
_CLOCK_CONTROLS = tuple(f"{module}.{name}" for module in (
    "torch._C._autograd", "torch.autograd", "torch.autograd.profiler")
    for name in _PROFILER_CONTROLS) + tuple(f"cupti.cupti.{n}" for n in _CUPTI_CONTROLS)
_MACHINERY = ("threading", "concurrent.futures", "multiprocessing", "queue", "_thread")
_LIBRARIES = ("torch", "triton")  # passed over too when finding who launched GPU work
_WATCH: Forbidden | None = None


def watch(is_candidate: Callable[[str], bool], narrow_interpreted: bool = False) -> Forbidden:
    """The process's watch (the recorders are installed once), begun afresh for one
    evaluation: call before the candidate's import. ``narrow_interpreted``: the narrow
    address rule under the interpreter too (on a GPU it always holds)."""
    global _WATCH
    if _WATCH is None:
        _WATCH = Forbidden()
    _WATCH.begin(is_candidate, narrow_interpreted)
    return _WATCH


class Forbidden:
    """The recorders over the calls above; see the module docstring."""

    def __init__(self) -> None:
        self._is_candidate: Callable[[str], bool] = lambda path: False
        self.started: list[str] = []  # where the candidate started a thread
        self.exits: list[str] = []  # which way out of the mode, and where
        self.unseen: list[str] = []  # which GPU work past the mode and the launches, where
        self.reads: list[str] = []  # which read of the dispatch mode stack, where
        self.clocks: list[str] = []  # kernels that read a clock register, and where seen
        self.narrow: list[str] = []  # kernels whose address offsets may wrap in 32 bits
        self._narrow_interpreted = False  # that rule under the interpreter too (opt-in)
        self._sources: dict[str, list[str]] = {}  # candidate file -> its clock reads
        self._harness: set[int] = set()
        self._lock = threading.Lock()
        for module, name in _STARTERS:
            self._wrap(module, name, self._recording_start)
        for module, name in _MODE_EXITS:
            self._wrap(module, name, functools.partial(self._recording_exit,
                                                       what=f"{module}.{name}"))
        for module, name in _MODE_READS:
            self._wrap(module, name, functools.partial(self._refusing_read,
                                                       what=f"{module}.{name}"))
        for path in _UNSEEN_GPU_WORK:
            owner, name = path.rsplit(".", 1)
            self._wrap(owner, name, functools.partial(self._recording_unseen, what=path))
        for path in _CLOCK_CONTROLS:  # the harness reaches them through torch: passed over
            owner, name = path.rsplit(".", 1)
            self._wrap(owner, name, functools.partial(
                self._refusing_read, what=path, passed_over=_MACHINERY + _LIBRARIES))
        self._wrap("triton.compiler.compiler.CompiledKernel", "_init_handles",
                   self._refusing_clock_ir)
        self._wrap("triton.runtime.interpreter.InterpretedFunction", "run",
                   self._refusing_clock_source)

    @staticmethod
    def _wrap(owner_path: str, name: str,
              recorder: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
        """Replace ``owner.name`` (owner a module, or a class inside one) by its recorder;
        a name this host lacks (no CUDA: no graph replay, no jiterator; no CUPTI
        bindings) is left."""
        module_path, _, attrs = owner_path, "", ""
        while True:
            try:
                owner: Any = importlib.import_module(module_path)
                break
            except Exception:  # noqa: BLE001 - not a module (a class), or not loadable here
                module_path, _, tail = module_path.rpartition(".")
                attrs = f"{tail}.{attrs}" if attrs else tail
                if not module_path:
                    return
        for attr in filter(None, attrs.split(".")):
            owner = getattr(owner, attr, None)
        original = getattr(owner, name, None) if owner is not None else None
        if original is not None:
            setattr(owner, name, recorder(original))

    def begin(self, is_candidate: Callable[[str], bool], narrow_interpreted: bool = False
              ) -> None:
        """One evaluation: threads alive now are the harness's."""
        with self._lock:
            self._is_candidate = handed.remembered(is_candidate)  # asked per frame
            self._narrow_interpreted = narrow_interpreted
            self.started, self.exits, self.unseen, self.reads = [], [], [], []
            self.clocks, self._sources, self.narrow = [], {}, []
            self._harness = self._running_threads()

    @staticmethod
    def _running_threads() -> set[int]:
        """Every live thread's ident: one seam, so a test that runs the worker inside a
        test runner can leave out the runner's own threads."""
        return set(sys._current_frames())

    def _recording_start(self, start: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            where = self._candidate_frame()
            started = start(*args, **kwargs)
            ident = getattr(started, "ident", started)  # 3.13 returns a handle
            with self._lock:
                if where:
                    self.started.append(where)
                elif isinstance(ident, int):  # the harness's or a library's own thread
                    self._harness.add(ident)
            return started

        return recorded

    def _recording_exit(self, call: Callable[..., Any], what: str) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            where = self._candidate_frame()
            if where:
                with self._lock:
                    self.exits.append(f"{what} at {where}")
            return call(*args, **kwargs)

        return recorded

    def _refusing_read(self, call: Callable[..., Any], what: str,
                       passed_over: tuple[str, ...] = _MACHINERY) -> Callable[..., Any]:
        @functools.wraps(call)
        def refused(*args: Any, **kwargs: Any) -> Any:
            where = self._candidate_frame(passed_over)
            if where:
                with self._lock:
                    self.reads.append(f"{what} at {where}")
                raise PermissionError(f"{what}: the dispatch mode and the GPU clock are "
                                      "the evaluator's, not the candidate's to use")
            return call(*args, **kwargs)

        return refused

    def _refusing_clock_ir(self, init: Callable[..., Any]) -> Callable[..., Any]:
        """A compiled kernel whose IR reads a clock is not loaded (every first launch
        loads it here, whoever compiled it)."""
        @functools.wraps(init)
        def refused(kernel: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(kernel, "module", None) is None:
                asm = getattr(kernel, "asm", None) or {}
                what = clock_reads.ir_reads(asm)
                if what:
                    self._refuse_clock(what, f"kernel {getattr(kernel, 'name', '?')}")
                ttir = asm.get("ttir") if hasattr(asm, "get") else None
                if isinstance(ttir, str) and self._candidates_ir(ttir):
                    self._refuse_narrow(getattr(kernel, "name", "?"),
                                        narrow_addresses.findings(ttir))
            return init(kernel, *args, **kwargs)

        return refused

    def _refusing_clock_source(self, run: Callable[..., Any]) -> Callable[..., Any]:
        """Under the interpreter (no IR): a kernel of the candidate's file is not run when
        that file reads a clock register."""
        @functools.wraps(run)
        def refused(function: Any, *args: Any, **kwargs: Any) -> Any:
            path = getattr(getattr(function.fn, "__code__", None), "co_filename", "")
            if path and self._is_candidate(path):
                if path not in self._sources:
                    try:
                        with open(path, encoding="utf-8") as handle:
                            self._sources[path] = clock_reads.source_reads(handle.read())
                    except OSError:
                        self._sources[path] = []
                if self._sources[path]:
                    self._refuse_clock(self._sources[path], "candidate.py, interpreted")
                if self._narrow_interpreted:
                    launch = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
                    self._refuse_narrow(getattr(function.fn, "__name__", "?"),
                                        narrow_addresses.launch_findings(function, args,
                                                                         launch))
            return run(function, *args, **kwargs)

        return refused

    def _candidates_ir(self, ttir: str) -> bool:
        """The IR's source locations name the candidate's file (a kernel of the harness's
        or a library's is not the candidate's to fix); an IR without them counts."""
        files = set(narrow_addresses.source_files(ttir))
        return not files or any(self._is_candidate(f) for f in files)

    def _refuse_narrow(self, kernel: str, found: list[str] | None) -> None:
        if found:
            with self._lock:
                self.narrow.append(narrow_addresses.message(kernel, found))
            raise narrow_addresses.NarrowAddress(self.narrow[-1])

    def narrow_problem(self) -> str | None:
        """The first kernel refused for offsets that may wrap in 32 bits, or None."""
        with self._lock:
            return self.narrow[0] if self.narrow else None

    def _refuse_clock(self, what: list[str], where: str) -> None:
        with self._lock:
            self.clocks.append(clock_reads.message(what, where))
        raise PermissionError(self.clocks[-1])

    def reached(self) -> str | None:
        """The candidate's reads of the dispatch mode stack (refused), or None: reaching
        into the harness, like the reads introspection.py refuses."""
        with self._lock:
            reads = list(dict.fromkeys(self.reads))
            if self.clocks:
                return self.clocks[0]
        if not reads:
            return None
        return (f"the candidate reached into the evaluator ({', '.join(reads[:3])} of "
                "candidate.py): the dispatch mode on the stack is the evaluator's tracker, "
                "the profiler and CUPTI its GPU clock, and a kernel's wrapper has no use "
                "for either")

    def _recording_unseen(self, call: Callable[..., Any], what: str) -> Callable[..., Any]:
        @functools.wraps(call)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            where = self._candidate_frame(_MACHINERY + _LIBRARIES)
            if where:
                with self._lock:
                    self.unseen.append(f"{what} at {where}")
            return call(*args, **kwargs)

        return recorded

    def _candidate_frame(self, passed_over: tuple[str, ...] = _MACHINERY) -> str | None:
        """'line N' when the innermost frame outside the modules ``passed_over`` (the
        thread machinery; for GPU work torch and Triton too) is the candidate's, else
        None."""
        frame: FrameType | None = sys._getframe(2)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(
                passed_over):
            frame = frame.f_back
        if frame is not None and handed.is_candidates(frame, self._is_candidate):
            return f"line {frame.f_lineno}"
        # a library calling a recorder it was handed (a module's forward, a hook)
        above = handed.handed_by_candidate(frame, (sys._getframe(1).f_code,),
                                           self._is_candidate) if frame is not None else None
        return f"line {above.f_lineno}" if above is not None else None

    def problem(self) -> str | None:
        """Why the candidate broke the rule, or None."""
        with self._lock:
            started, exits = list(self.started), list(self.exits)
            unseen, harness = list(dict.fromkeys(self.unseen)), set(self._harness)
        if unseen:
            return (f"the candidate launched GPU work that neither the evaluator's dispatch "
                    f"mode nor its launch tracking sees ({', '.join(unseen[:3])} of "
                    f"candidate.py): a CUDA graph's capture or replay, or a jiterator kernel, "
                    f"computes outside the rule ({RULE})")
        if exits:
            return (f"the candidate stepped out of the evaluator's dispatch mode "
                    f"({', '.join(exits[:3])} of candidate.py), where torch work is "
                    f"invisible to the rule ({RULE})")
        here = threading.get_ident()
        others = [t for t in self._running_threads() if t not in harness and t != here]
        if not started and not others:
            return None
        seen = f"started at {', '.join(started[:3])}" if started else \
            f"{len(others)} thread(s) running that the harness did not start"
        return (f"the candidate runs work on another thread ({seen} of candidate.py), where "
                f"torch work is invisible to the rule ({RULE}), so the candidate may not "
                "start threads: do the work in run()'s own Triton launches")
