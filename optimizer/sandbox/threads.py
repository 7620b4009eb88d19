"""Threads the candidate starts: work the Triton-only rule cannot see.

Why: the dispatch mode that records every torch op (provenance.py) is per thread, so a
candidate could compute its answer with torch on another thread, or have a thread started
at import finish the output after ``run()`` returned; the tamper check compares what the
harness holds and sees neither. A Triton kernel's wrapper has no use for threads, so the
rule is plain: the candidate starts none.

Two ways of seeing one, both checked after the import and after every call:

* every thread start goes through a recorder installed before the candidate is imported
  (``_thread.start_new_thread`` and the aliases ``threading`` holds). A start is the
  candidate's when the innermost frame outside the standard library's thread machinery
  (threading, concurrent.futures, multiprocessing, queue) is in the candidate's file; one
  made inside a library the candidate called (Triton compiling on a first launch) is the
  harness's;
* a Python thread alive that was neither there before the import nor started by the
  harness counts too: a start through a starter the candidate kept from before the
  recorder (its closure, ``gc``) is still a running thread.
"""

from __future__ import annotations

import _thread
import sys
import threading
from collections.abc import Callable
from typing import Any

from kernelkb.optimizer.sandbox.provenance import RULE

# the names a thread start can go through: _thread's own, and the aliases threading took
# at its import (Python 3.11-3.12: _start_new_thread; 3.13: start_joinable_thread)
_STARTERS = ((_thread, "start_new_thread"), (_thread, "start_joinable_thread"),
             (threading, "_start_new_thread"), (threading, "_start_joinable_thread"))


_WATCH: ThreadWatch | None = None
_MACHINERY = ("threading", "concurrent.futures", "multiprocessing", "queue", "_thread")


def watch(is_candidate: Callable[[str], bool]) -> ThreadWatch:
    """The process's watch (the recorder is installed once), begun afresh for one
    evaluation: call before the candidate's import."""
    global _WATCH
    if _WATCH is None:
        _WATCH = ThreadWatch()
    _WATCH.begin(is_candidate)
    return _WATCH


class ThreadWatch:
    """The recorder over the process's thread starters; see the module docstring."""

    def __init__(self) -> None:
        self._is_candidate: Callable[[str], bool] = lambda path: False
        self.started: list[str] = []  # where the candidate started a thread
        self._harness: set[int] = set()
        self._lock = threading.Lock()
        for module, name in _STARTERS:
            original = getattr(module, name, None)
            if original is not None:
                setattr(module, name, self._recording(original))

    def begin(self, is_candidate: Callable[[str], bool]) -> None:
        """One evaluation: threads alive now are the harness's."""
        with self._lock:
            self._is_candidate = is_candidate
            self.started = []
            self._harness = set(sys._current_frames())

    def _recording(self, start: Callable[..., Any]) -> Callable[..., Any]:
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

    def _candidate_frame(self) -> str | None:
        """'line N' when the innermost frame outside the thread machinery is the
        candidate's, else None."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_globals.get("__name__", "").startswith(
                _MACHINERY):
            frame = frame.f_back
        if frame is not None and self._is_candidate(frame.f_code.co_filename):
            return f"line {frame.f_lineno}"
        return None

    def problem(self) -> str | None:
        """Why the candidate broke the rule, or None."""
        with self._lock:
            started = list(self.started)
            harness = set(self._harness)
        here = threading.get_ident()
        others = [t for t in sys._current_frames() if t not in harness and t != here]
        if not started and not others:
            return None
        seen = f"started at {', '.join(started[:3])}" if started else \
            f"{len(others)} thread(s) running that the harness did not start"
        return (f"the candidate runs work on another thread ({seen} of candidate.py), where "
                f"torch work is invisible to the rule ({RULE}), so the candidate may not "
                "start threads: do the work in run()'s own Triton launches")
