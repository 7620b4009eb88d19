"""A call's launch plan, replayed on fresh inputs without the candidate's ``run()``.

Why: every other rule of the worker is a detector of one route by which a wrapper's
Python makes the answer (PyTorch compute, a value read on the host, state kept from an
earlier call, a call that behaves differently when watched), and a detector race is lost
by the side that must close every route. A replay closes them together: while one
checked call runs, the tracker (provenance.py) records what the Triton-only rule allows
``run()`` to do, in order:

* each launch of a Triton kernel: the kernel, its grid and every argument;
* each allocation, copy, cast or fill PyTorch made (the ops of ``ALLOCATION_OPS`` and
  ``MOVEMENT_OPS``), with its arguments;

and nothing else. The replay then draws fresh inputs of the same shape, rebuilds every
storage the call used (the inputs from the fresh draw; what an allocation or copy made,
by doing it again; anything else, such as a table made at import or a value PyTorch
computed, as it was when the call first used it), runs the recorded steps in order, and
checks the outputs against the reference on the fresh inputs. Work ``run()`` did outside
those steps is not in the replay: an answer that depended on it is stale there, and
wrong. A data-independent constant computed in PyTorch (a RoPE table) is the same on
any inputs, so an honest kernel that uses one replays right.

The replay runs in the worker's process, after the other checks; it never calls
``run()`` or anything of the candidate's but its kernels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

StorageKey = tuple[int, int]


def storage_key(t: torch.Tensor) -> StorageKey | None:
    """The identity of a tensor's storage while it lives: (object, address)."""
    try:
        return storage_key_of(t.untyped_storage())
    except (RuntimeError, NotImplementedError):
        return None


def storage_key_of(storage: torch.UntypedStorage) -> StorageKey | None:
    ptr = storage.data_ptr()
    return (storage._cdata, ptr) if ptr else None


@dataclass
class Step:
    """One recorded step: an op (``func``) or a launch (``launch``: the launcher, which
    takes the arguments and keyword arguments anew)."""

    args: Any
    kwargs: dict[str, Any]
    func: Any = None
    launch: Callable[..., Any] | None = None
    out: Any = None


@dataclass
class Plan:
    """What one call did that the rule allows, with the storages it found."""

    inputs: list[Any] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    outputs: Any = None
    made: set[StorageKey] = field(default_factory=set)  # allocated by a recorded op
    found: dict[StorageKey, torch.UntypedStorage] = field(default_factory=dict)
    # the found storages themselves (kept from before the call), to see which it changed
    live: dict[StorageKey, torch.UntypedStorage] = field(default_factory=dict)
    launches: list[Any] = field(default_factory=list)  # each launch's kernel and arguments

    @property
    def signature(self) -> tuple[Any, ...]:
        """What was launched (kernels, grids, argument layouts and scalars): the same for
        any two calls on inputs of one layout, whatever their values or flags."""
        return tuple(self.launches)

    def see(self, value: Any) -> None:
        """Copy each storage ``value`` uses that the plan cannot make again (not an
        input, not made by a recorded op) as it is now, the first time it is used."""
        inputs = {storage_key(t) for t in tensors(self.inputs)}
        for t in tensors(value):
            key = storage_key(t)
            if key is None or key in inputs or key in self.made or key in self.found:
                continue
            storage = t.untyped_storage()
            copy = torch.UntypedStorage(storage.nbytes(), device=storage.device)
            copy.copy_(storage)
            self.found[key] = copy
            self.live[key] = storage

    def kept_and_changed(self) -> list[int]:
        """The sizes (bytes) of the storages the call found, kept from before it (not an
        input, not made by a recorded op: a module-level buffer, an earlier call's), that
        it left changed. A call that leaves state in such a buffer for the next call to
        find shares it with every call: two calls in flight (two streams, two threads)
        read each other's. A read-only table (RoPE's cos/sin) and a workspace the call
        returns to its former state (split-K arrival counters zeroed after use) are
        unchanged. An output on such a buffer is left to the rule that names it (an
        output must be allocated in its own call)."""
        changed = []
        outputs = {storage_key(t) for t in tensors(self.outputs)}
        for key, copy in self.found.items():
            live = self.live.get(key)
            if live is None or key in outputs or live.nbytes() != copy.nbytes():
                continue
            now = torch.empty(0, dtype=torch.uint8, device=live.device).set_(live)
            before = torch.empty(0, dtype=torch.uint8, device=copy.device).set_(copy)
            if not torch.equal(now, before):
                changed.append(live.nbytes())
        return changed

    def op(self, func: Any, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        self.see((args, kwargs))
        self.steps.append(Step(args, kwargs, func=func, out=out))
        written = {id(t) for t in tensors((args, kwargs))}
        for t in tensors(out):
            key = storage_key(t)
            if key is not None and id(t) not in written:
                self.made.add(key)

    def add_launch(self, launch: Callable[..., Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any], identity: Any = None) -> None:
        self.see((args, kwargs))
        self.steps.append(Step(args, kwargs, launch=launch))
        self.launches.append(identity)

    def finish(self, outputs: Any) -> None:
        self.see(outputs)
        self.outputs = outputs


def tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in a (nested) value, a host-side tensor descriptor's as well."""
    found = []
    for leaf in tree_leaves(value):
        base = getattr(leaf, "base", None)  # a TensorDescriptor wraps its tensor
        if isinstance(base, torch.Tensor):
            leaf = base
        if isinstance(leaf, torch.Tensor):
            found.append(leaf)
    return found


class LayoutChanged(ValueError):
    """The fresh inputs are not laid out as the recorded ones: no replay."""


def replay(plan: Plan, fresh: list[Any]) -> Any:
    """The recorded steps on ``fresh`` inputs (same shapes and layout as the recorded
    ones); the outputs as the call's outputs were laid out."""
    storages: dict[StorageKey, torch.UntypedStorage] = {}
    for old, new in zip(plan.inputs, fresh, strict=True):
        if isinstance(old, torch.Tensor):
            if not isinstance(new, torch.Tensor) or (old.shape, old.stride(),
                                                     old.storage_offset(), old.dtype) != (
                    new.shape, new.stride(), new.storage_offset(), new.dtype):
                raise LayoutChanged("the fresh inputs are laid out otherwise")
            key = storage_key(old)
            if key is not None:
                storages[key] = new.untyped_storage()

    def storage_of(t: torch.Tensor) -> torch.UntypedStorage | None:
        key = storage_key(t)
        if key is None:
            return None
        if key not in storages and key in plan.found:
            copy = torch.UntypedStorage(plan.found[key].nbytes(), device=t.device)
            copy.copy_(plan.found[key])  # every replay starts from the call's state
            storages[key] = copy
        return storages.get(key)

    def remap(leaf: Any) -> Any:
        if isinstance(leaf, torch.Tensor):
            storage = storage_of(leaf)
            if storage is None:
                return leaf
            view = torch.empty(0, dtype=leaf.dtype, device=leaf.device)
            return view.set_(storage, leaf.storage_offset(), leaf.size(), leaf.stride())
        base = getattr(leaf, "base", None)
        if isinstance(base, torch.Tensor) and dataclasses.is_dataclass(leaf) \
                and not isinstance(leaf, type):
            return dataclasses.replace(leaf, base=remap(base))
        return leaf

    with torch.no_grad():
        for step in plan.steps:
            args, kwargs = tree_map(remap, step.args), tree_map(remap, step.kwargs)
            if step.launch is not None:
                step.launch(args, kwargs)
                continue
            out = step.func(*args, **kwargs)
            written = {storage_key(t) for t in tensors((step.args, step.kwargs))}
            for old, new in zip(tensors(step.out), tensors(out), strict=False):
                key = storage_key(old)
                if key is not None and key not in written:  # made by this op, now again
                    storages[key] = new.untyped_storage()
        return tree_map(remap, plan.outputs)
