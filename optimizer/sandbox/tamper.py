"""Catch a candidate that replaces what the harness relies on (its timer, its checks).

The candidate runs in the worker's own process, so it can reach every module the harness
uses: patch ``triton.testing.do_bench`` to halve its answer, ``time.perf_counter``,
``torch.cuda.Event.elapsed_time``, ``torch.cuda.synchronize``, or the harness's own
``checks.compare_outputs``, or leave a ``TorchFunctionMode`` open that rewrites every op
the checks run. ``Snapshot`` records, before the candidate is imported, the identity of
every callable attribute of those modules and of the classes they define (plus the
builtins and the tensor class), and the depth of PyTorch's mode stacks; ``changes``
lists what differs after the import and after each call. A change is a rejection:
``cheat_timer`` when it touches the timing path, ``cheat_tamper`` otherwise. A class is
read through its MRO, so a method added to ``torch.Tensor`` that shadows one inherited
from the C base class is a change; a module-level name added over a builtin (``len``,
``abs``) is one too. Other additions are not (lazy submodules appear on first use).
Identity is not enough: a function keeps its identity when its ``__code__``, defaults or
closure cells are swapped, so those are held and compared too; and the harness's own
module constants (``UPPER_CASE`` names: thresholds, the allowed-op sets) count like its
callables, so rebinding ``compare.NOISE_FLOOR`` is a change.

What the timing itself uses is held here too (builtins captured at import: a C builtin
cannot be altered, only the module attribute that names it), so the wall-clock
cross-check in timing.py reads a clock the candidate cannot touch.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import time
from dataclasses import dataclass
from itertools import repeat
from operator import is_not
from types import CodeType, FunctionType, ModuleType
from typing import Any

import torch

# Modules whose callables the timing path looks up at call time (do_bench does).
TIMING_MODULES = ("time", "triton.testing", "torch.cuda", "torch.cuda.streams",
                  "torch.cuda.memory", "triton.runtime.driver", "kernelkb.optimizer.sandbox.timing",
                  "triton.backends.nvidia.driver", "torch.profiler", "torch.autograd.profiler",
                  "kernelkb.optimizer.sandbox.kernel_clock", "cupti.cupti")
# Modules the checks and the worker rely on.
HARNESS_MODULES = ("builtins", "torch", "torch.nn.functional", "torch.testing", "math",
                   "json", "os", "random", "numpy", "kernelkb.optimizer.sandbox.checks",
                   "kernelkb.optimizer.sandbox.worker", "kernelkb.optimizer.sandbox.streams",
                   "kernelkb.optimizer.sandbox.provenance", "kernelkb.optimizer.sandbox.bounds",
                   "kernelkb.optimizer.sandbox.errors", "kernelkb.optimizer.sandbox.tamper",
                   "kernelkb.optimizer.sandbox.compiled_info", "kernelkb.kernels.base",
                   "kernelkb.kernels.conditions", "kernelkb.kernels.scalar_args",
                   "kernelkb.kernels.config", "kernelkb.kernels.candidate_loading",
                   "kernelkb.kernels.discovery", "kernelkb.kernels.dtypes",
                   "kernelkb.optimizer.sandbox.compare", "kernelkb.kernels.shared.comparison",
                   "kernelkb.optimizer.sandbox.forbidden",
                   "kernelkb.optimizer.sandbox.guards",
                   "triton.runtime.jit", "triton.runtime.interpreter",
                   "triton.compiler.compiler", "triton.runtime.autotuner")
# Classes whose methods the checks and the timer call.
EXTRA_CLASSES = (("torch", "Tensor"), ("torch.cuda", "Event"), ("torch.cuda", "Stream"))

# Rebound by torch itself when torch._dynamo is first imported (torch.compile does): the
# harness never calls them, so their rebinding is not a change.
REBOUND_BY_TORCH = frozenset({"torch.manual_seed"})

HELD_PERF_COUNTER = time.perf_counter
HELD_MONOTONIC = time.monotonic


@dataclass(frozen=True)
class Change:
    where: str  # "triton.testing.do_bench", "torch.Tensor.abs", "mode stack"
    timing: bool


Held = tuple[Any, ...]  # the value itself, then what a swap could change inside it


def _held(value: Any) -> Held:
    """The value and the parts of it that can be replaced in place: a function's code,
    defaults and closure cells' contents (also behind a staticmethod, classmethod or
    property)."""
    parts: list[Any] = [value]
    inner: list[Any] = [getattr(value, "__func__", None)] \
        if isinstance(value, (staticmethod, classmethod)) else \
        [value.fget, value.fset] if isinstance(value, property) else [value]
    for func in inner:
        code = getattr(func, "__code__", None)
        if not isinstance(code, CodeType):  # not a function (the function type itself)
            continue
        parts += [code, getattr(func, "__defaults__", None),
                  getattr(func, "__kwdefaults__", None)]
        parts += [_contents(c) for c in getattr(func, "__closure__", None) or ()]
    return tuple(parts)


def _same(before: Held, now: Any) -> bool:
    if now is not before[0]:
        return False
    if len(before) == 1:  # the same object, with no code inside it to swap (a C builtin)
        return True
    if type(now) is FunctionType:  # most of them: compared in place (a guard runs often)
        cells = now.__closure__ or ()
        return now.__code__ is before[1] and now.__defaults__ is before[2] \
            and now.__kwdefaults__ is before[3] and len(cells) == len(before) - 4 \
            and all(_contents(c) is b for c, b in zip(cells, before[4:], strict=True))
    after = _held(now)
    return len(after) == len(before) and all(a is b for a, b in zip(after, before,
                                                                     strict=True))


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _watched(namespace: dict[str, Any], constants: bool, memo: dict[int, Held]
             ) -> dict[str, Held]:
    """Callables (and, for the harness's own modules, its UPPER_CASE constants). ``memo``
    holds each object once, whichever namespaces name it (a tensor method is named by
    every tensor class): its code is read once."""
    watched = {}
    for k, v in list(namespace.items()):
        if callable(v) or isinstance(v, (staticmethod, classmethod, property)) \
                or (constants and k.isupper() and not k.startswith("_")):
            held = memo.get(id(v))
            if held is None:
                held = memo[id(v)] = _held(v)
            watched[k] = held
    return watched


def _resolved(cls: type) -> dict[str, Any]:
    """Every attribute as lookup finds it: the first class along the MRO that has it."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        found.update(vars(klass))
    return found


_BUILTIN_NAMES = frozenset(dir(builtins))
# slots every class has, rebound by Python itself
_UNWATCHED = frozenset({"__weakref__", "__dict__", "__subclasshook__", "__init_subclass__"})


class Snapshot:
    """Identities of what the harness calls, taken before the candidate is imported."""

    def __init__(self, task_module: str | None = None, extra: tuple[str, ...] = ()) -> None:
        self.entries: dict[str, tuple[tuple[str, ...], tuple[Any, ...], frozenset[str], bool]]
        self.entries = {}  # where -> (names, the objects they named, those names, timing)
        self._memo: dict[int, Held] = {}  # by id: the held values keep the objects alive
        # id -> (what was held of an object with insides, where it is named)
        self._insides: dict[int, tuple[Held, list[tuple[str, bool]]]] = {}
        self._initial_names: dict[str, frozenset[str]] = {}
        names = [(m, True) for m in TIMING_MODULES] + [(m, False) for m in HARNESS_MODULES]
        names += [(m, False) for m in (task_module, *extra) if m]
        for name, timing in names:
            module = _module(name)
            if module is None:
                continue
            self._add(name, vars(module), timing)
            for attr, value in list(vars(module).items()):
                if isinstance(value, type) and getattr(value, "__module__", None) == name:
                    self._add(f"{name}.{attr}", _resolved(value), timing)
        for module_name, cls_name in EXTRA_CLASSES:
            module = _module(module_name)
            cls = getattr(module, cls_name, None) if module else None
            if isinstance(cls, type):
                self._add(f"{module_name}.{cls_name}", _resolved(cls),
                          module_name == "torch.cuda")
        driver = _active_driver()
        if driver is not None:
            self._add("triton.runtime.driver.active", _resolved(type(driver)), True)
        self._keep = [sys.modules.get(n) for n, _ in names]  # modules stay imported
        self.modes = _mode_depths()

    def _add(self, where: str, namespace: dict[str, Any], timing: bool) -> None:
        watched = {k: v for k, v in _watched(namespace, where.startswith("kernelkb."),
                                             self._memo).items() if k not in _UNWATCHED}
        self.entries[where] = (tuple(watched), tuple(h[0] for h in watched.values()),
                               frozenset(watched), timing)
        for attr, held in watched.items():
            if len(held) > 1:  # something inside to swap: compared once, named everywhere
                self._insides.setdefault(id(held[0]), (held, []))[1].append(
                    (f"{where}.{attr}", timing))
        if where in sys.modules:  # names a module already had (callable or not)
            self._initial_names[where] = frozenset(namespace)

    def changes(self) -> list[Change]:
        """What was replaced or deleted since the snapshot (empty when nothing was). Two
        passes, both run after every call of the candidate, so both are cheap: each
        namespace's objects compared by identity in one sweep; then each object with
        insides (a function's code, defaults, closure) compared once, however many
        namespaces name it: reading a function's code is an audited event, which the
        evaluator's hooks look at."""
        found: list[Change] = []
        for where, (keys, objects, watched, timing) in self.entries.items():
            now = self._namespace(where)
            if now is None:
                found.append(Change(where, timing))
                continue
            current = tuple(map(now.get, keys, repeat(_MISSING, len(keys))))
            if any(map(is_not, current, objects)):  # identity only: no __eq__ of theirs
                found += [Change(f"{where}.{attr}", timing)
                          for attr, was, value in zip(keys, objects, current, strict=True)
                          if value is not was and f"{where}.{attr}" not in REBOUND_BY_TORCH]
            if where in sys.modules and where != "builtins":
                shadowing = (now.keys() - watched) & _BUILTIN_NAMES - {"__builtins__"}
                found += [Change(f"{where}.{attr} (over the builtin)", timing)
                          for attr in sorted(shadowing) if attr not in self._globals(where)]
        for held, names in self._insides.values():
            if not _same(held, held[0]):
                found += [Change(name, timing) for name, timing in names
                          if name not in REBOUND_BY_TORCH]
        if _mode_depths() != self.modes:
            found.append(Change("PyTorch's mode stack (a TorchFunctionMode or "
                                "TorchDispatchMode was left open)", False))
        return list(dict.fromkeys(found))

    def _globals(self, where: str) -> frozenset[str]:
        return self._initial_names.get(where, frozenset())

    def _namespace(self, where: str) -> dict[str, Any] | None:
        if where == "triton.runtime.driver.active":
            driver = _active_driver()
            return _resolved(type(driver)) if driver is not None else None
        if where in sys.modules:
            return vars(sys.modules[where])
        parent, _, attr = where.rpartition(".")
        module = sys.modules.get(parent)
        cls = getattr(module, attr, None) if module is not None else None
        return _resolved(cls) if isinstance(cls, type) else None


_MISSING = object()


def _module(name: str) -> ModuleType | None:
    if name == "builtins":
        return builtins
    if name == "__main__":
        return sys.modules.get(name)
    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a module this host lacks (no CUDA backend) is skipped
        return None


def _active_driver() -> Any:
    try:
        from triton.runtime import driver
        return driver.active
    except Exception:  # noqa: BLE001 - no GPU driver on the CPU interpreter
        return None


def _mode_depths() -> tuple[int, int]:
    return (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())


def describe(changes: list[Change]) -> tuple[str, str]:
    """(error kind, message) for a non-empty list of changes."""
    timing = [c.where for c in changes if c.timing]
    kind = "cheat_timer" if timing or any(_names_timer(c.where) for c in changes) \
        else "cheat_tamper"
    names = sorted({c.where for c in changes})
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    what = "the timing path" if kind == "cheat_timer" else "the harness"
    return kind, (f"the candidate replaced what {what} relies on: {shown}; the evaluator "
                  "times and checks through its own references and rejects any change")


def _names_timer(where: str) -> bool:
    return any(word in where for word in ("do_bench", "perf_counter", "monotonic",
                                          "elapsed_time", "synchronize", "Event"))
