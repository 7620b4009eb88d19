"""One call of a kernel's ``run()`` recorded as its launch plan, where the op is served.

Why: the exported op replays what ``run()`` launched, not ``run()`` itself, as the judge
does (optimizer/sandbox/launch_plan.py): per call it pays the launches, not the wrapper's
Python. This file records the same steps as the judge's plan (each Triton launch with its
grid and every argument; each PyTorch op that made, filled or copied a tensor) in the
process that serves the op, once per input layout; ``plan_bind.py`` turns a record into
a launcher. ``optimizer/export.py`` writes this file's text verbatim into the exported
module, so it needs torch and triton alone; every name is prefixed ``plan_`` / ``Plan``.

A call refuses to become a plan (and the op calls ``run()`` for that layout instead) when
it read a tensor's value on the host, launched a compiled kernel past ``JITFunction.run``
or passed a launch a pointer that is not a tensor's (nor a tensor descriptor's).
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import typing

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

PLAN_LOCK = threading.Lock()  # one recording at a time: the launch hook is process-wide


class PlanRefused(Exception):
    """Why a call cannot be replayed as a plan."""


def plan_storage(t: torch.Tensor) -> tuple | None:
    """A storage's identity while it lives: (object, address)."""
    try:
        storage = t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    ptr = storage.data_ptr()
    return (storage._cdata, ptr) if ptr else None


def plan_tensors(value: typing.Any) -> list:
    """Every tensor in a nested value, a tensor descriptor's base included."""
    found = []
    for leaf in tree_leaves(value):
        base = getattr(leaf, "base", None)
        if isinstance(base, torch.Tensor):
            leaf = base
        if isinstance(leaf, torch.Tensor):
            found.append(leaf)
    return found


@dataclasses.dataclass
class PlanStep:
    """A recorded op (``func``) or launch (``fn``: the Triton kernel, ``grid`` of three
    ints, ``args``: every parameter in order; ``kernel``: the compiled kernel on a GPU,
    None in the interpreter, which replays through ``fn.run`` with ``kwargs``)."""

    args: typing.Any
    kwargs: dict
    func: typing.Any = None
    out: typing.Any = None
    fn: typing.Any = None
    grid: tuple = ()
    kernel: typing.Any = None


@dataclasses.dataclass
class PlanRecord:
    inputs: list
    steps: list = dataclasses.field(default_factory=list)
    outputs: typing.Any = None
    made: dict = dataclasses.field(default_factory=dict)  # storage -> (step, output leaf)
    refused: str | None = None


class _PlanOps(TorchDispatchMode):
    """Sees every aten op of the recorded call; keeps those that make or write tensors."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # never compiles; skip importing torch._dynamo for it

    def __init__(self, record: PlanRecord) -> None:
        super().__init__()
        self.record = record
        self.depth = 0  # > 0 inside a launch: the interpreter's own copies are not steps
        self.thread = threading.get_ident()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not self.depth and threading.get_ident() == self.thread:
            self.op(func, args, kwargs, out)
        return out

    def op(self, func, args, kwargs, out) -> None:
        record, schema = self.record, func._schema
        if schema.name == "aten::_local_scalar_dense" or any(
                isinstance(v, (bool, int, float)) for v in tree_leaves(out)):
            record.refused = record.refused or f"{schema.name} read a value on the host"
            return
        mutable = any(a.alias_info is not None and a.alias_info.is_write
                      for a in schema.arguments)
        view = any(r.alias_info is not None for r in schema.returns)
        if view and not mutable:
            return  # a view: its storage is found again by the launches that use it
        step = len(record.steps)
        record.steps.append(PlanStep(args, kwargs, func=func, out=out))
        written = {plan_storage(t) for t in plan_tensors((args, kwargs))}
        for n, t in enumerate(plan_tensors(out)):
            key = plan_storage(t)
            if key is not None and key not in written and key not in record.made:
                record.made[key] = (step, n)


def _plan_parameters(fn, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """(every parameter's value in order, by name) as Triton binds them; None when one has
    no value (then the call is not planned)."""
    params = list(inspect.signature(fn.fn).parameters.values())
    values = list(args)
    for p in params[len(args):]:
        if p.name in kwargs:
            values.append(kwargs[p.name])
        elif p.default is not inspect.Parameter.empty:
            values.append(p.default)
        else:
            return None
    return tuple(values), {p.name: v for p, v in zip(params, values, strict=False)}


def _plan_launch_hooks(record: PlanRecord, ops: _PlanOps):
    """Replacements of the launch entry points that record each launch (on the recording
    thread) and launch it as Triton would; the originals to put back."""
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.jit import JITFunction

    owners = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        owners.append(InterpretedFunction)
    except ImportError:
        pass
    saved = [(owner, "run", owner.run) for owner in owners]
    saved.append((CompiledKernel, "__getitem__", CompiledKernel.__getitem__))

    def hook(original):
        def run(self, *args, grid, warmup, **kwargs):
            if warmup or ops.depth or threading.get_ident() != ops.thread:
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            bound = _plan_parameters(self, args, kwargs)
            if bound is None:
                record.refused = record.refused or f"{self.__name__}: a parameter unbound"
                return original(self, *args, grid=grid, warmup=warmup, **kwargs)
            if callable(grid):
                grid = grid(bound[1])
            grid = (tuple(grid) + (1, 1))[:3]
            ops.depth += 1
            try:
                kernel = original(self, *args, grid=grid, warmup=False, **kwargs)
            finally:
                ops.depth -= 1
            if hasattr(kernel, "result"):
                kernel = kernel.result()
            interpreted = not isinstance(self, JITFunction)
            if not interpreted and getattr(kernel, "function", None) is None:
                record.refused = record.refused or f"{self.__name__} did not load"
            for leaf in tree_leaves(bound[0]):  # a pointer that is not a tensor's
                if hasattr(leaf, "data_ptr") and not isinstance(leaf, torch.Tensor):
                    record.refused = record.refused or \
                        f"{self.__name__} was given a {type(leaf).__name__} as a pointer"
            record.steps.append(PlanStep(
                args if interpreted else bound[0], kwargs if interpreted else {},
                fn=self, grid=grid, kernel=None if interpreted else kernel))
            return kernel
        return run

    def direct(self, grid):
        record.refused = record.refused or "a compiled kernel launched past JITFunction.run"
        return saved[-1][2](self, grid)

    patches = [(owner, "run", hook(original)) for owner, _, original in saved[:-1]]
    patches.append((CompiledKernel, "__getitem__", direct))
    return patches, saved


def plan_record(run, args: tuple) -> tuple[typing.Any, PlanRecord]:
    """Call ``run(*args)`` once, recording its plan; (its outputs, the record)."""
    record = PlanRecord(inputs=list(args))
    ops = _PlanOps(record)
    with PLAN_LOCK:
        patches, saved = _plan_launch_hooks(record, ops)
        for owner, name, value in patches:
            setattr(owner, name, value)
        try:
            with torch.no_grad(), ops:
                outputs = run(*args)
        finally:
            for owner, name, value in saved:
                setattr(owner, name, value)
    record.outputs = outputs
    if not any(step.fn is not None for step in record.steps):
        record.refused = record.refused or "no Triton launch"
    return outputs, record
