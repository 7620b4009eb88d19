"""The harness is not the candidate's to read or rewrite: frames, gc's object graph, code
objects, ctypes and tracers are refused to the candidate's own code.

Why: the checks that must live in the candidate's process (the counterfactual call, the
launch counts, the timers) can each be told apart or switched off by code that reads the
harness: a frame walk finds ``check_counterfactual`` on the stack and the candidate is
honest only there; ``gc.get_objects()`` finds the tracker and reads its flags; a swapped
``__code__`` or a ctypes write changes what the harness runs. A Triton kernel's wrapper
needs none of it, so the rule is plain, like the thread rule (forbidden.py): the
candidate makes none of these calls.

How: a Python audit hook (``sys.addaudithook``, which nothing in the process can remove)
sees every such operation (``sys._getframe``, ``tb_frame``/``gi_frame``/``cr_frame``,
``sys._current_frames``, ``gc.get_objects``/``get_referrers``/``get_referents``,
``__code__`` read or set, a code object made, a type's or a function's attribute set or
deleted, ``sys.settrace``/``setprofile``, every ctypes operation Python audits: taking
an address, making data from one, loading a library or looking a symbol up; not
``ctypes.cast``, ``ctypes.memmove`` or a call through a function pointer, which raise
no event on CPython 3.11, so the source rules' import allow-list is what keeps ctypes
away). One is the candidate's when the innermost frame outside the standard library is
in the candidate's file, and no standard-library frame on the way uses a frame only for
itself (``collections.namedtuple``, ``warnings.warn``, logging's caller lookup,
``typing``, ``enum``, ``dataclasses``):
an operation inside torch or Triton, or one the harness makes, is theirs. The candidate's
own functions and classes stay its own to change. The candidate's operation is refused
(it raises) and recorded; the evaluation then fails as ``cheat_tamper``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import CodeType, FrameType, FunctionType
from typing import Any

from kernelkb.optimizer.sandbox import handed

# operations refused whatever they touch
_ALWAYS = frozenset({
    "sys._getframe", "sys._getframemodulename", "sys._current_frames",
    "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "code.__new__", "function.__new__",
})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
# refused unless the object is the candidate's own
_ON_OBJECTS = frozenset({"object.__getattr__", "object.__setattr__", "object.__delattr__"})
# standard-library modules that take a frame for their own use and hand none back
_CONSUMERS = ("collections", "warnings", "typing", "enum", "dataclasses", "abc")
_STDLIB = frozenset(sys.stdlib_module_names)
_HOOK: Introspection | None = None


def watch(is_candidate: Callable[[str], bool], module_name: str) -> Introspection:
    """The process's hook (added once: an audit hook stays for the process's life), begun
    afresh for one evaluation; call before the candidate's import."""
    global _HOOK
    if _HOOK is None:
        _HOOK = Introspection()
        sys.addaudithook(_HOOK.audit)
    _HOOK.begin(is_candidate, module_name)
    return _HOOK


def stand_down() -> None:
    """No candidate for the process's hook (an evaluation that turned the rule off, in a
    process where an earlier one added it)."""
    if _HOOK is not None:
        _HOOK.begin(lambda path: False, "")


class Introspection:
    """The audit hook; see the module docstring."""

    def __init__(self) -> None:
        self._is_candidate: Callable[[str], bool] = lambda path: False
        self._module = ""
        self._inside = threading.local()  # the hook's own frame reads are not audited
        self._lock = threading.Lock()
        self.reached: list[str] = []

    def begin(self, is_candidate: Callable[[str], bool], module_name: str) -> None:
        with self._lock:
            self._is_candidate = handed.remembered(is_candidate)  # asked per frame
            self._module, self.reached = module_name, []

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "object.__getattr__":
            if args[1] != "__code__" and args[1] not in _FRAME_ATTRS:
                return  # a read of defaults or globals: refused by nothing
        elif event not in _ALWAYS and event not in _ON_OBJECTS and event[:7] != "ctypes.":
            return  # the fast path: every other audited event in the process
        if getattr(self._inside, "on", False):
            return
        self._inside.on = True
        try:
            what = self._refused(event, args)
        finally:
            self._inside.on = False
        if what:
            with self._lock:
                self.reached.append(what)
            raise RuntimeError(f"refused by the evaluator: {what}")

    # what its absence means (the hook runs untraced), said outright: Python looks it up
    # on each hook at every audited event in the process, and on a bound method a missing
    # one costs a raised and cleared AttributeError, about as much as the hook's fast
    # path (the watchers' stack walks read ``f_code``, an audited event, once a frame)
    audit.__cantrace__ = False  # type: ignore[attr-defined]

    def _refused(self, event: str, args: tuple[Any, ...]) -> str | None:
        """'EVENT at line N' when the candidate's own code makes this operation. Whose
        operation it is comes first: most are the harness's or a library's (the tamper
        check reads every harness function's code after every call), and for those the
        object needs no look."""
        line = self._candidate_line(sys._getframe(2), event)  # the operation's frame
        if not line:
            return None
        if event in _ON_OBJECTS:
            obj, name = args[0], str(args[1])
            # a frame leads up the stack, whose frame it is; the candidate's own functions
            # and classes are its own to read and change
            if name not in _FRAME_ATTRS and self._owns(obj):
                return None
            event = f"{event} {name!r}"
        return f"{event} at line {line} of candidate.py"

    def _owns(self, obj: Any) -> bool:
        """The candidate's own function, code object or class (its file, its module)."""
        if isinstance(obj, FunctionType):
            return self._is_candidate(obj.__code__.co_filename)
        if isinstance(obj, CodeType):
            return self._is_candidate(obj.co_filename)
        if isinstance(obj, type):
            return obj.__module__ == self._module
        return False

    def _candidate_line(self, frame: FrameType | None, event: str = "") -> int | None:
        while frame is not None:
            module = str(frame.f_globals.get("__name__", ""))
            top = module.partition(".")[0]
            if top not in _STDLIB:
                break
            if top in _CONSUMERS or (top == "logging" and
                                     frame.f_code.co_name == "findCaller"):
                return None  # a library use of a frame that hands none back
            frame = frame.f_back
        if frame is None:
            return None
        if handed.is_candidates(frame, self._is_candidate):
            return frame.f_lineno
        # a library calling what it was handed (sys._getframe as a module's forward):
        # whoever handed it over makes the call
        above = handed.handed_by_candidate(frame, handed.resolve(event) if event else (),
                                           self._is_candidate)
        return above.f_lineno if above is not None else None

    def problem(self) -> str | None:
        """Why the candidate broke the rule, or None."""
        with self._lock:
            reached = list(self.reached)
        if not reached:
            return None
        return (f"the candidate reached into the evaluator ({'; '.join(reached[:3])}): "
                "frames, gc's object graph, code objects, ctypes and tracers are the "
                "harness's, and a kernel's wrapper needs none of them")
