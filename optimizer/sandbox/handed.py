"""Whose call a call is, when a library makes it with a callable it was handed.

Why: the runtime readers (surroundings.py, introspection.py, forbidden.py) count a call
as the candidate's when the innermost frame outside the standard library is in the
candidate's file. A builtin or another module's function stored where a library calls
it (an ``nn.Module``'s ``forward`` or hooks, a callback) is then called from the
library's frame: ``time.time`` as a module's ``forward`` reads the clock from torch's
``Module._call_impl``. The library did not choose that callable, whoever handed it did.

How: a library frame that holds the very callable being made in one of its locals (its
``forward_call``, the ``hook`` of a loop) was handed it, so the call is passed up: it is
the candidate's when a frame of the candidate's stands between it and the harness
(kernelkb's own frames end the walk). A frame is the candidate's when its code is in the
candidate's file, or when it runs in the candidate's globals (text the candidate had
compiled or evaluated).
"""

from __future__ import annotations

import builtins
import functools
import importlib
import sys
from collections.abc import Callable, Iterable
from types import CodeType, FrameType
from typing import Any

HARNESS = "kernelkb"  # the evaluator's own modules: a walk up the stack stops there
# the watchers whose readers take their caller's frame (``sys._getframe``, which the
# introspection hook sees) at every watched call, often under a library a hundred frames
# deep (torch importing, Triton compiling): for their frames the few locals are looked
# at before the stack is walked, which a frame that holds nothing handed then needs not
WATCHERS = frozenset(f"{__package__}.{name}" for name in ("surroundings", "forbidden"))


class _Answers(dict):  # type: ignore[type-arg]
    """``is_candidate``'s answers by path, each asked once (``__missing__``)."""

    def __init__(self, is_candidate: Callable[[str], bool]) -> None:
        super().__init__()
        self._ask = is_candidate

    def __missing__(self, path: str) -> bool:
        answer = self[path] = self._ask(path)
        return answer


def remembered(is_candidate: Callable[[str], bool]) -> Callable[[str], bool]:
    """``is_candidate`` asked once per path, its answer kept for the evaluation.

    Why: a watched read walks the stack and asks of every frame's file whether it is the
    candidate's; a compile under the watchers makes thousands of reads through stacks a
    hundred frames deep, and the answer for a path does not change (the watchers begin
    afresh, with a fresh one of these, for each evaluation). A dict's own lookup, so a
    path seen before costs no Python call."""
    return _Answers(is_candidate).__getitem__


def is_candidates(frame: FrameType, is_candidate: Callable[[str], bool]) -> bool:
    """The frame runs the candidate's code, or code compiled in its globals."""
    if is_candidate(frame.f_code.co_filename):
        return True
    path = frame.f_globals.get("__file__")
    return isinstance(path, str) and is_candidate(path)


def _same(value: Any, callee: Any) -> bool:
    if value is callee:
        return True
    if not callable(value) or isinstance(value, type):
        return False
    if isinstance(callee, CodeType):  # a wrapper known by its code (forbidden.py's)
        return getattr(value, "__code__", None) is callee or (
            isinstance(value, functools.partial) and _same(value.func, callee))
    try:
        inners = (getattr(value, "__func__", None), getattr(value, "__wrapped__", None))
    except Exception:  # noqa: BLE001 - an object whose attributes raise
        return False
    for inner in inners:
        if inner is not None and (inner is callee or inner is getattr(callee, "__func__", 0)):
            return True
    if isinstance(value, functools.partial):
        return _same(value.func, callee)
    return False


def holds(frame: FrameType, callees: Iterable[Any]) -> bool:
    """Whether ``frame`` holds one of ``callees`` in a local: it was handed the callable
    it calls, rather than naming it."""
    wanted = [c for c in callees if c is not None]
    if not wanted:
        return False
    try:
        values = list(frame.f_locals.values())
    except Exception:  # noqa: BLE001 - a frame whose locals cannot be read
        return False
    return any(_same(v, c) for v in values for c in wanted)


def handed_by_candidate(frame: FrameType | None, callees: Iterable[Any],
                        is_candidate: Callable[[str], bool]) -> FrameType | None:
    """The candidate's frame a library's ``frame`` was handed the callable from, or None:
    ``frame`` holds the callable, and a frame of the candidate's stands above it before
    the harness's."""
    if frame is None:
        return None
    if frame.f_globals.get("__name__") in WATCHERS and not holds(frame, callees):
        return None  # the answer below, without the walk (see WATCHERS)
    above = frame.f_back
    while above is not None:  # first the cheap walk: most calls have no candidate above
        if is_candidates(above, is_candidate):
            break
        if str(above.f_globals.get("__name__", "")).startswith(HARNESS):
            return None
        above = above.f_back
    if above is None or not holds(frame, callees):
        return None
    return above


def resolve(event: str) -> tuple[Any, ...]:
    """The callables an audited event names (``os.listdir``, ``sys._getframe``, ``open``,
    ``object.__setattr__``), for ``holds``."""
    special = {"open": (builtins.open,), "object.__getattr__": (builtins.getattr,),
               "object.__setattr__": (builtins.setattr,),
               "object.__delattr__": (builtins.delattr,)}
    if event in special:
        return special[event]
    module, _, name = event.rpartition(".")
    owner = sys.modules.get(module)
    if owner is None and module:
        try:
            owner = importlib.import_module(module)
        except Exception:  # noqa: BLE001 - not a module (code.__new__): nothing to hold
            return ()
    found = getattr(owner, name, None) if owner is not None else None
    return (found,) if found is not None else ()
