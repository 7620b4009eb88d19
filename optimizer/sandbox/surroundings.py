"""A kernel's wrapper does not read where or when it runs: the clock, its process's
identity, the file system, the environment, the interpreter's modules and arguments.

Why: every check in an evaluation sees the candidate inside the evaluator. A candidate
that takes the fast (wrong) path only outside it, ten minutes after its import, when its
pid is not the jail's, when ``/.dockerenv`` or a ``KERNELKB_*`` variable is missing, or
when the evaluator's modules are not loaded, passes every check and is wrong in a user's
process. No check inside the evaluation can see a difference that only exists outside it,
so the rule is on the reads themselves: a Triton kernel's wrapper needs none of them.

How, in the worker, before the candidate's import:

* the clocks (``time``'s readers, ``datetime``'s ``now``/``today``), the process's
  identity and limits (``os.getpid``, ``getuid``, ``uname``, ``times``, ``getcwd``,
  ``cpu_count``, ``resource.getrlimit``, ``socket.gethostname``), a file's metadata
  (``os.stat``, ``lstat``, ``access``: ``os.path.exists`` goes through them), the GPU's
  state beyond the inputs (``torch.cuda.memory_allocated``, ``mem_get_info``, ...) and
  ``os.environ`` (``os.getenv`` reads it) are replaced by readers that refuse the
  candidate's own calls;
* opening a file or listing a folder is seen by an audit hook (``open``, ``os.listdir``,
  ``os.scandir``, ``glob.glob``), which nothing in the process can remove;
* ``sys.modules`` and ``sys.argv`` are plain containers no reader sees, so the source is
  read for them instead (``source_reads``).

A call is the candidate's when the innermost frame outside the standard library is in
its file, and no standard-library module on the way reads for itself (the import system
finding a module by name, logging stamping a record's time, a warning's source line):
torch, Triton and the harness read as they like. A library frame that calls a reader it
was handed (held in a local: an ``nn.Module``'s ``forward``, a hook) does not make the
read its own: the read is the candidate's when a frame of the candidate's stands above it
before the harness's (``handed.py``). A refused read raises; the evaluation fails as
``cheat_tamper``.

Not seen: a clock, a reader or a path kept under another name by a library the candidate
can reach (``somelib.perf_counter`` taken with ``from time import perf_counter`` before
the readers were replaced) and a ``datetime`` class another module holds; nor a bomb on
the kernel's own call count set past the calls an evaluation makes, which reads nothing.
Closing those means a process whose surroundings are the same inside and outside the
evaluator.
"""

from __future__ import annotations

import ast
import datetime
import functools
import importlib
import os
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from kernelkb.optimizer.sandbox import handed

# the readers replaced, by module
_READERS = {
    "time": ("time", "time_ns", "monotonic", "monotonic_ns", "perf_counter",
             "perf_counter_ns", "process_time", "process_time_ns", "thread_time",
             "thread_time_ns", "clock_gettime", "clock_gettime_ns", "localtime", "gmtime",
             "ctime", "asctime", "strftime"),
    "os": ("getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getgroups",
           "getlogin", "getpgrp", "getsid", "uname", "times", "getloadavg", "getcwd",
           "stat", "lstat", "access", "readlink", "statvfs", "cpu_count",
           "sched_getaffinity", "sysconf"),
    "socket": ("gethostname",),
    # a timer is a clock: an alarm's handler could flip a kernel to its other path later
    "signal": ("signal", "alarm", "setitimer", "getitimer"),
    "resource": ("getrusage", "getrlimit"),
    # the GPU's state beyond the inputs: what the evaluator has allocated, what else runs
    **{module: ("memory_allocated", "max_memory_allocated", "memory_reserved",
                "max_memory_reserved", "memory_stats", "memory_stats_as_nested_dict",
                "memory_summary", "memory_snapshot", "mem_get_info", "list_gpu_processes",
                "utilization", "temperature", "power_draw", "clock_rate")
       for module in ("torch.cuda", "torch.cuda.memory")},
}
# audited operations that read the file system
_AUDITED = frozenset({"open", "os.listdir", "os.scandir", "glob.glob", "os.getxattr",
                      "os.listxattr"})
# standard-library modules that read for themselves and hand the candidate nothing of
# it: logging's time stamp, a warning's or a traceback's source line
_OWN_READERS = ("logging", "warnings", "traceback")
# the import system finding and loading a module by name (not a loader called on a path
# of the candidate's choosing, which would hand the file back in a syntax error)
_IMPORTING = frozenset({"_find_and_load", "_find_and_load_unlocked", "_gcd_import"})
# names of the interpreter's state that only a source read can see (and where imports
# are looked for: a folder put there would make the import system read for the candidate)
_SYS_STATE = frozenset({"modules", "argv", "orig_argv", "executable", "path", "flags",
                        "meta_path", "path_hooks", "path_importer_cache"})
_STDLIB = frozenset(sys.stdlib_module_names)
_WATCH: Surroundings | None = None


def watch(is_candidate: Callable[[str], bool]) -> Surroundings:
    """The process's readers (installed once), begun afresh for one evaluation: call
    before the candidate's import and before the tamper check's snapshot, which then
    holds the readers as what must stay."""
    global _WATCH
    if _WATCH is None:
        _WATCH = Surroundings()
        sys.addaudithook(_WATCH.audit)
    _WATCH.begin(is_candidate)
    return _WATCH


def stand_down() -> None:
    """No candidate for the process's readers (an evaluation that turned the rule off,
    in a process where an earlier one installed them)."""
    if _WATCH is not None:
        _WATCH.begin(lambda path: False)


def source_reads(source: str) -> list[str]:
    """'sys.modules at line N' for each read of the interpreter's own state in the
    source: ``sys.X`` and ``from sys import X`` for X in modules, argv, executable, path,
    flags."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # the import reports it, with its line
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in _SYS_STATE
                and isinstance(node.value, ast.Name) and node.value.id == "sys"):
            found.append(f"sys.{node.attr} at line {node.lineno}")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            found += [f"sys.{alias.name} at line {node.lineno}" for alias in node.names
                      if alias.name in _SYS_STATE or alias.name == "*"]
    return found


def message(reads: list[str]) -> str:
    """Why a read of the surroundings is refused, naming the first few."""
    return (f"the candidate read its surroundings ({', '.join(reads[:3])} of candidate.py): "
            "a kernel that reads the clock, its process, the file system, the environment "
            "or the interpreter's modules can behave one way under the evaluator and "
            "another in a user's process, and a Triton kernel's wrapper needs none of them")


class Surroundings:
    """The readers and the audit hook; see the module docstring."""

    def __init__(self) -> None:
        self._is_candidate: Callable[[str], bool] = lambda path: False
        self._lock = threading.Lock()
        self._inside = threading.local()
        self.reads: list[str] = []
        for module_name, names in _READERS.items():
            try:
                module = importlib.import_module(module_name)
            except ImportError:  # resource: not on every OS
                continue
            for name in names:
                original = getattr(module, name, None)
                if original is not None:
                    setattr(module, name, self._refusing(original, f"{module_name}.{name}"))
        self._watch_datetime()
        self._watch_environ()

    def begin(self, is_candidate: Callable[[str], bool]) -> None:
        with self._lock:
            self._is_candidate = handed.remembered(is_candidate)  # asked per frame
            self.reads = []

    def problem(self) -> str | None:
        """Why the candidate broke the rule, or None."""
        with self._lock:
            reads = list(dict.fromkeys(self.reads))
        return message(reads) if reads else None

    # -- seeing a read -----------------------------------------------------------------
    def _refuse_if_candidate(self, what: str, frame: FrameType | None,
                             callees: tuple[Any, ...] = ()) -> None:
        if getattr(self._inside, "on", False):
            return  # this module's own frame reads
        self._inside.on = True
        try:
            line = self._candidate_line(frame, callees)
        finally:
            self._inside.on = False
        if line is None:
            return
        with self._lock:
            self.reads.append(f"{what} at line {line}")
        raise PermissionError(f"{what}: refused by the evaluator, a kernel's wrapper does "
                              "not read its surroundings")

    def _candidate_line(self, frame: FrameType | None,
                        callees: tuple[Any, ...] = ()) -> int | None:
        while frame is not None:
            top = str(frame.f_globals.get("__name__", "")).partition(".")[0]
            if top not in _STDLIB:
                break
            if top in _OWN_READERS or frame.f_code.co_name in _IMPORTING:
                return None
            frame = frame.f_back
        if frame is None:
            return None
        if handed.is_candidates(frame, self._is_candidate):
            return frame.f_lineno
        # a library calling a reader it was handed (a module's forward, a hook): whoever
        # handed it over makes the read
        above = handed.handed_by_candidate(frame, callees, self._is_candidate)
        return above.f_lineno if above is not None else None

    def _refusing(self, call: Callable[..., Any], what: str) -> Callable[..., Any]:
        @functools.wraps(call)
        def refusing(*args: Any, **kwargs: Any) -> Any:
            self._refuse_if_candidate(what, sys._getframe(1), (refusing, call))
            return call(*args, **kwargs)

        return refusing

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event in _AUDITED:
            self._refuse_if_candidate(f"{event}({str(args[0])[:60]!r})" if args else event,
                                      sys._getframe(1), handed.resolve(event))

    audit.__cantrace__ = False  # type: ignore[attr-defined] # as introspection.py's hook

    # -- readers without a module function to replace ------------------------------------
    def _watch_datetime(self) -> None:
        """``datetime.datetime`` and ``datetime.date`` are C types whose ``now`` cannot be
        replaced: the module's names point to subclasses whose readers refuse."""
        refuse = self._refuse_if_candidate

        class WatchedDate(datetime.date):
            @classmethod
            def today(cls) -> Any:  # type: ignore[override]
                refuse("datetime.date.today", sys._getframe(1), (WatchedDate.today,))
                return super().today()

        class WatchedDatetime(datetime.datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:  # type: ignore[override]
                refuse("datetime.datetime.now", sys._getframe(1), (WatchedDatetime.now,))
                return super().now(tz)

            @classmethod
            def utcnow(cls) -> Any:  # type: ignore[override]
                refuse("datetime.datetime.utcnow", sys._getframe(1),
                       (WatchedDatetime.utcnow,))
                return super().utcnow()

            @classmethod
            def today(cls) -> Any:  # type: ignore[override]
                refuse("datetime.datetime.today", sys._getframe(1),
                       (WatchedDatetime.today,))
                return super().today()

        for watched in (WatchedDate, WatchedDatetime):
            watched.__name__ = watched.__qualname__ = watched.__mro__[1].__name__
            watched.__module__ = "datetime"
        datetime.date, datetime.datetime = WatchedDate, WatchedDatetime  # type: ignore[misc]

    def _watch_environ(self) -> None:
        """``os.environ`` is one mapping object the whole process shares: its class is
        swapped for one whose reads refuse the candidate's (``os.getenv`` reads through it)."""
        refuse = self._refuse_if_candidate
        base = type(os.environ)

        def watched(name: str) -> Callable[..., Any]:
            method = getattr(base, name)

            def read(self: Any, *args: Any, **kwargs: Any) -> Any:
                refuse(f"os.environ ({name})", sys._getframe(1), (read,))
                return method(self, *args, **kwargs)

            return read

        names = ("__getitem__", "__contains__", "__iter__", "__len__", "get", "keys",
                 "items", "values", "copy", "__repr__")
        watching = type("_Environ", (base,), {name: watched(name) for name in names})
        watching.__module__ = base.__module__
        os.environ.__class__ = watching
