"""The rules read from a candidate's source before any of it runs, as one verdict.

Why: the judge's worker refuses a source on them, and the shipped seeds must hold no
code the judge would refuse: one place says which rules a source meets and what kind of
failure breaking each is.
"""

from __future__ import annotations

import ast
import math
import typing

import torch

from kernelkb.kernels.base import Task
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.optimizer.sandbox import imports, named_compute, tensor_flow


def refused(source: str, task: Task | None = None) -> tuple[str, str] | None:
    """(error kind, message) for the first rule the source breaks, or None. ``task``
    says which of run()'s arguments are tensors and whether it takes precomputed
    factors; without one, run()'s arguments with no default are taken as tensors."""
    named = imports.problems(source)
    if named:
        return "cheat_tamper", imports.message(named)
    computed = named_compute.problems(source, bool(task and task.torch_constants),
                                      tensor_args(task) if task else None)
    if computed:
        return "torch_compute", named_compute.message(computed)
    caught = caught_errors(source)
    if caught:
        return "cheat_tamper", ("a wrapper may not catch an exception: what fails in the "
                                "jail and not in a user's process (an allocation past its "
                                "memory, a thread, a file) is caught only so, and tells "
                                "the two apart with no reader called; only a try of imports "
                                "caught as ImportError is allowed: " + "; ".join(caught[:3]))
    kept = tensor_flow.kept_returns_in(source)
    if kept:
        return "cheat_aliasing", ("what run() returns must be allocated in the call: a "
                                  "buffer kept in the module and handed out again is "
                                  "overwritten under a caller still holding it; refused on "
                                  "every path, taken or not: " + "; ".join(kept[:3]))
    return None


def caught_errors(source: str) -> list[str]:
    """'line N: ...' for each place the source catches an exception: a ``try`` with a
    handler (or a ``finally``, which can return over one) around anything but imports
    caught as ImportError, and a class's ``__exit__`` or ``__del__`` (_SWALLOWING).
    Red team 18: an 8 GiB ``torch.empty`` refused in the jail and granted outside, caught
    at import, chose the kernel's path."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if type(node).__name__ in ("Try", "TryStar"):  # TryStar: except* (3.11+)
            if not _imports_guarded(typing.cast(ast.Try, node)):
                found.append(f"line {typing.cast(ast.Try, node).lineno}: a try statement")
        elif isinstance(node, ast.ClassDef):
            found += [f"line {item.lineno}: defines {name}" for item in node.body
                      for name in _defined(item) if name in _SWALLOWING]
    return found


def _defined(item: ast.stmt) -> list[str]:
    """The names a class body's statement defines: a method, or an assignment's targets."""
    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [item.name]
    targets = item.targets if isinstance(item, ast.Assign) else \
        [item.target] if isinstance(item, ast.AnnAssign) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


# what Python calls with an exception it then drops: a context manager's exit may return
# True over one; an error in ``__del__`` is printed and ignored (red team 19: an 8 GiB
# allocation in a finalizer, its error swallowed with no try)
_SWALLOWING = ("__exit__", "__aexit__", "__del__")


def _imports_guarded(node: ast.Try) -> bool:
    """``try: import a`` ``except ImportError: import b``: an optional module, no more."""
    def imports(body: list[ast.stmt]) -> bool:
        return all(isinstance(b, (ast.Import, ast.ImportFrom, ast.Pass)) for b in body)

    names = [h.type for h in node.handlers]
    return bool(node.handlers) and not node.finalbody and imports(node.body) \
        and imports(node.orelse) and all(imports(h.body) for h in node.handlers) \
        and all(isinstance(t, ast.Name) and t.id in ("ImportError", "ModuleNotFoundError")
                for t in names) and type(node).__name__ == "Try"


def tensor_args(task: Task) -> tuple[bool, ...]:
    """Which of run()'s arguments are tensors: the task's inputs on its smallest CPU
    shape (attention's cache length is an int), then its scalar arguments (RMSNorm's eps)."""
    if task.name not in _TENSOR_ARGS:
        _TENSOR_ARGS[task.name] = _drawn(task)
    return _TENSOR_ARGS[task.name]


_TENSOR_ARGS: dict[str, tuple[bool, ...]] = {}  # per task name (a Task is not hashable)


def _drawn(task: Task) -> tuple[bool, ...]:
    shape = min(task.cpu_shapes, key=math.prod)
    inputs = task.make_inputs(shape, DTYPES[task.dtypes[0]], 0, "cpu")
    return (*(isinstance(v, torch.Tensor) for v in inputs), *(False for _ in task.scalar_args))
