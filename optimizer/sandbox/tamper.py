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
import gc
import importlib
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import repeat
from operator import is_, is_not, itemgetter
from types import CodeType, FunctionType, MethodType, ModuleType
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
_REFERENTS = gc.get_referents  # the sweep's reader, as the clocks are: gc is not watched


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
    for func in _inside(value):
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


def _inside(value: Any) -> list[Any]:
    """What ``_held`` reads the code of: the value itself, or what a staticmethod,
    classmethod or property wraps."""
    if isinstance(value, (staticmethod, classmethod)):
        return [getattr(value, "__func__", None)]
    if isinstance(value, property):
        return [value.fget, value.fset]
    return [value]


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


def _watched(namespace: Mapping[str, Any], constants: bool, memo: dict[int, Held]
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


def _resolved(cls: type) -> Mapping[str, Any]:
    """Every attribute as lookup finds it: the first class along the MRO that has it. A
    class with no base but ``object`` (most of them) is read in its own dict; otherwise
    each class dict is copied first: a dict merges into a dict in C, a mappingproxy one
    key at a time, three times slower."""
    dicts = [vars(klass) for klass in reversed(cls.__mro__) if klass is not object]
    if len(dicts) == 1:
        return dicts[0]
    found: dict[str, Any] = {}
    for namespace in dicts:
        found.update(namespace.copy())
    return found


_BUILTIN_NAMES = frozenset(dir(builtins))
_SHADOWABLE = _BUILTIN_NAMES - {"__builtins__"}  # a module's own __builtins__ is no shadow
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
        self._getters: dict[str, Callable[[Mapping[str, Any]], tuple[Any, ...]] | None] = {}
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
        self._functions = _Functions([held for held, _ in self._insides.values()])
        self._changed_insides()  # the sweep's first list, vouched for as every later one
        self.modes = _mode_depths()

    def _add(self, where: str, namespace: Mapping[str, Any], timing: bool) -> None:
        watched = {k: v for k, v in _watched(namespace, where.startswith("kernelkb."),
                                             self._memo).items() if k not in _UNWATCHED}
        self.entries[where] = (tuple(watched), tuple(h[0] for h in watched.values()),
                               frozenset(watched), timing)
        # the names read in one C call (a tuple of values needs two names or more)
        self._getters[where] = itemgetter(*watched) if len(watched) > 1 else None
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
        namespaces name it, and most of them all at once (``_Functions``): reading a
        function's code is an audited event, which the evaluator's hooks look at."""
        found: list[Change] = []
        for where, (keys, objects, watched, timing) in self.entries.items():
            now = self._namespace(where)
            if now is None:
                found.append(Change(where, timing))
                continue
            current = _current(self._getters[where], keys, now)
            if any(map(is_not, current, objects)):  # identity only: no __eq__ of theirs
                found += [Change(f"{where}.{attr}", timing)
                          for attr, was, value in zip(keys, objects, current, strict=True)
                          if value is not was and f"{where}.{attr}" not in REBOUND_BY_TORCH]
            if where in sys.modules and where != "builtins":
                shadowing = (now.keys() & _SHADOWABLE) - watched
                found += [Change(f"{where}.{attr} (over the builtin)", timing)
                          for attr in sorted(shadowing) if attr not in self._globals(where)]
        found += self._changed_insides()
        if _mode_depths() != self.modes:
            found.append(Change("PyTorch's mode stack (a TorchFunctionMode or "
                                "TorchDispatchMode was left open)", False))
        return list(dict.fromkeys(found))

    def _changed_insides(self) -> list[Change]:
        """Where an object with insides was changed in place. The functions are swept all
        at once first; only when the sweep sees a difference is every object compared one
        by one, which names what changed, or finds that nothing the snapshot holds did
        (a function's ``__dict__`` made on first use): the sweep then starts from now."""
        functions = self._functions
        if functions.unchanged():
            moved = [held for held in functions.others if not _same(held, held[0])]
        else:
            reading = functions.read()  # before the comparison that vouches for it
            moved = [held for held, _ in self._insides.values() if not _same(held, held[0])]
            if not moved:
                functions.rebase(reading)
        return [Change(name, timing) for held in moved
                for name, timing in self._insides[id(held[0])][1]
                if name not in REBOUND_BY_TORCH]

    def _globals(self, where: str) -> frozenset[str]:
        return self._initial_names.get(where, frozenset())

    def _namespace(self, where: str) -> Mapping[str, Any] | None:
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


def _current(getter: Callable[[Mapping[str, Any]], tuple[Any, ...]] | None,
             keys: tuple[str, ...], now: Mapping[str, Any]) -> tuple[Any, ...]:
    """What ``now`` names under ``keys`` (``_MISSING`` where a name was deleted): in one
    C call while every name is there, twice as fast as one ``get`` a name."""
    if getter is not None:
        try:
            return getter(now)
        except KeyError:
            pass
    return tuple(map(now.get, keys, repeat(_MISSING, len(keys))))


class _Functions:
    """The held functions' code, defaults, keyword defaults and closure compared in one
    sweep, without reading any function's ``__code__``: that read is an audited event, and
    the evaluator's audit hooks walk the stack on each one (2,000 functions: 25 ms a
    check, where the sweep takes 0.5 ms).

    ``gc.get_referents`` lists what an object holds, one audited event for any number of
    objects. It is called on the functions, each followed by a one-item list of a marker
    that nothing else holds, so each function's fields come out apart; and compared by
    identity with the list taken with the snapshot. A function's fields come out in C
    order, the empty ones left out: code, globals, builtins, module, defaults, keyword
    defaults, doc, name, then fields that are never a str (dict, closure, annotations,
    type parameters) around the qualified name, a str. So where the lists are the same,
    each function's code is its held code (always first); and its defaults and keyword
    defaults are the held ones: the name and the qualified name, the only strs from the
    name on, fix where the doc and the name lie, and before the doc a held module that is
    a str can be neither a tuple of defaults nor a dict of keyword defaults, and these two
    cannot stand in for each other. The closure tuple is the same, so its cells are, and
    their contents (which may be rebound without an audited event) are compared here.

    What holds nothing of this (an interpreter that lists fields in another order, a
    wrapper around something other than a function, a function whose module is not a
    str) is compared one by one, as is everything once the sweep sees a difference:
    lazily made fields (``__dict__``, ``__annotations__``) differ without a change. The
    sweep never decides that something changed, only that nothing did; each list it
    compares with was read just before a one-by-one comparison found nothing changed."""

    def __init__(self, held: list[Held]) -> None:
        self.others: list[Held] = []  # compared one by one every time
        self._wrappers: list[tuple[Any, tuple[Any, ...]]] = []  # with what they wrapped
        swept: dict[int, Any] = {}  # the functions, each once
        for h in held:
            inside = [f.__func__ if type(f) is MethodType else f for f in _inside(h[0])]
            inside = [f for f in inside if f is not None]
            if not _TRAVERSAL_KNOWN or not all(
                    type(f) is FunctionType and type(f.__module__) is str for f in inside):
                self.others.append(h)
                continue
            if type(h[0]) not in (FunctionType, MethodType):  # a wrapper can be re-wrapped
                self._wrappers.append((h[0], tuple(_inside(h[0]))))
            swept.update((id(f), f) for f in inside)
        self._count = len(swept)
        self._cells = tuple(c for f in swept.values() for c in f.__closure__ or ())
        self._marker = object()
        box = [self._marker]
        self._args = tuple(x for f in swept.values() for x in (f, box))
        self._referents: list[Any] | None = None  # off until rebase()
        self._contents: tuple[Any, ...] = ()

    def read(self) -> tuple[list[Any], tuple[Any, ...]]:
        """The functions' fields and their cells' contents, as they are now."""
        return (_REFERENTS(*self._args) if self._args else [],
                tuple(map(_contents, self._cells)))

    def rebase(self, reading: tuple[list[Any], tuple[Any, ...]]) -> None:
        """Sweep against ``reading`` from now: read when the held insides were last seen,
        one by one, with nothing run in between."""
        referents, self._contents = reading
        fields = _cut(referents, self._marker, self._count)
        good = fields is not None and all(
            len(f) > 3 and type(f[0]) is CodeType and type(f[3]) is str for f in fields)
        self._referents = referents if good and self._args else None

    def unchanged(self) -> bool:
        """Nothing held of a function in the sweep differs (False also when the sweep is
        off, or when what differs is not held: then the caller compares one by one)."""
        if self._referents is None:
            return False
        for wrapper, was in self._wrappers:
            now = _inside(wrapper)
            if len(now) != len(was) or any(map(is_not, now, was)):
                return False
        now = _REFERENTS(*self._args)
        if len(now) != len(self._referents) or any(map(is_not, now, self._referents)):
            return False
        return not any(map(is_not, map(_contents, self._cells), self._contents))


def _cut(referents: list[Any], marker: object, count: int) -> list[list[Any]] | None:
    """``referents`` cut at each ``marker``: one list per function, or None unless there
    are ``count`` and the last ends the list."""
    fields: list[list[Any]] = []
    start = 0
    for i, value in enumerate(referents):
        if value is marker:
            fields.append(referents[start:i])
            start = i + 1
    return fields if len(fields) == count and start == len(referents) else None


def _traversal_known() -> bool:
    """Whether ``gc.get_referents`` lists a function's fields in the order ``_Functions``
    relies on: seen on a function with every field set (CPython 3.10 to 3.13)."""
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info < (3, 14):
        return False
    cell = None

    def probe(a: Any = None, *, b: Any = None) -> Any:
        return cell

    probe.__module__, probe.__doc__, probe.__dict__["x"] = "module", "doc", 0
    fields = [probe.__code__, probe.__globals__, getattr(probe, "__builtins__", None),
              probe.__module__,
              probe.__defaults__, probe.__kwdefaults__, probe.__doc__, probe.__name__,
              probe.__dict__, probe.__closure__, probe.__annotations__, probe.__qualname__]
    listed = _REFERENTS(probe)
    return len(listed) == len(fields) and all(map(is_, listed, fields))


_TRAVERSAL_KNOWN = _traversal_known()


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
