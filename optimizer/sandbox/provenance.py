"""The Triton-only rule: a candidate's outputs must come from its own Triton kernels.

The rule, as the agent is told it: inside ``run`` PyTorch may *allocate* tensors (empty,
zeros, full, ..._like), *lay them out* (views, reshapes, strides, contiguous), *move*
them (copy_, clone, cat, stack, pad) and *cast* them (to, _to_copy): these move or place
data but compute nothing of the op. It may make index ranges (arange) and, where the op
takes factors callers precompute (RoPE's cos/sin of positions: ``Task.torch_constants``),
compute those constants. Elsewhere a constant PyTorch computed, at the import or in
``run``, is compute like any other: a table of the op over every value of a 16-bit dtype
is input-free and carries the answer. Any
other PyTorch op (softmax, mm, add, exp, sum, where, index, ...) whose inputs hold the
data (the run inputs, anything a kernel wrote, or values derived from them) is compute:
it may run, but its result must not reach an output. Every output must be written by a
Triton kernel defined in the candidate's own file, and at least one must launch.

How it is seen, on the GPU and in the interpreter alike:

* a ``TorchDispatchMode`` sees every aten op on tensors, whatever the Python spelling
  (``torch.*``, ``Tensor`` methods, ``torch.nn.functional``, ``torch.ops.aten``, ``.data``,
  in-place ops, a reference imported from the project). It keeps a provenance per storage:
  holds data, written by which Triton kernels, touched by which compute ops, or filled
  from host values made outside PyTorch's ops (``torch.tensor``, ``from_numpy``);
* the launch path is wrapped (``JITFunction.run``, the interpreter's
  ``InterpretedFunction.run`` and a compiled kernel's direct ``[grid]`` runner): every
  tensor argument of a launch counts as written by that kernel, and inherits what torch
  computed into any of its arguments (a torch result copied out by a kernel, RMSNorm's
  rstd computed in torch and applied in the kernel); a kernel defined outside the
  candidate's file (a library's, an inductor-generated one) counts as foreign compute;
* host escapes are recorded: ``Tensor.numpy``/``tolist``/``__dlpack__``/``item``/
  ``apply_``/``map_``/``map2_`` (Python over the memory),
  ``storage().tolist`` and ``torch.utils.dlpack.to_dlpack`` on data, and
  (an audit hook, which cannot be removed) ctypes calls and new processes inside ``run``;
* a counterfactual call whose Triton launches run on decoy copies of the data (each
  float tensor that holds data swapped for the same view of a fresh random draw at its
  scale) and whose fresh allocations hold a random draw, as in every recorded call (so
  they do not tell it apart): if the output is still right,
  it did not come from the kernels (this catches routes no hook sees, e.g. numpy writing
  through a raw pointer). The decoys are finite, so reading one's own output for NaN
  tells nothing, and the launches run, so a probe kernel's flag tells nothing either.
"""

from __future__ import annotations

import dataclasses
import math
import random
import secrets
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves, tree_map

from kernelkb.optimizer.sandbox import launch_plan

RULE = ("the output must come from the candidate's Triton kernels: inside run(), PyTorch "
        "may only allocate, view, copy and cast tensors and compute data-independent "
        "constants where the op takes precomputed factors (RoPE's cos/sin)")

# Index ranges: made from their arguments' numbers alone, no values of the op.
RANGE_OPS = frozenset({"aten::arange", "aten::linspace"})
# Read only the shape / dtype / device of their tensor arguments: the result is fresh.
ALLOCATION_OPS = frozenset({
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty",
    "aten::new_empty_strided", "aten::zeros", "aten::zeros_like", "aten::new_zeros",
    "aten::ones", "aten::ones_like", "aten::new_ones", "aten::full", "aten::full_like",
    "aten::new_full", "aten::scalar_tensor", "aten::empty_permuted", "aten::resize_",
    "aten::fill_", "aten::zero_",
})
_DECOY_SAMPLE = 1 << 16  # elements a decoy's scale is read from
_POISONED = frozenset({"aten::empty", "aten::empty_like", "aten::empty_strided",
                       "aten::new_empty", "aten::new_empty_strided", "aten::empty_permuted"})
# Move, place or cast values without computing on them (views are found by the schema).
MOVEMENT_OPS = frozenset({
    "aten::copy_", "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::_copy_from",
    "aten::_copy_from_and_resize", "aten::cat", "aten::stack", "aten::constant_pad_nd",
    "aten::repeat", "aten::flip", "aten::roll", "aten::_unsafe_view", "aten::view_copy",
    "aten::permute_copy", "aten::expand_copy", "aten::t_copy", "aten::transpose_copy",
    "aten::unsqueeze_copy", "aten::squeeze_copy", "aten::slice_copy", "aten::select_copy",
    "aten::detach_copy", "aten::alias_copy", "aten::narrow_copy", "aten::set_",
    "aten::record_stream", "aten::_local_scalar_dense", "aten::lift_fresh_copy",
    "aten::type_as",  # a cast, seen whole under inference_mode
})
# What a launch plan replays besides the launches: allocations, copies, casts and fills
# (not .item(), which reads a value onto the host, nor set_ / record_stream)
REPLAYED_OPS = (ALLOCATION_OPS | MOVEMENT_OPS) - {
    "aten::_local_scalar_dense", "aten::set_", "aten::record_stream", "aten::lift_fresh_copy"}
# Make a tensor from host values (Python lists, numpy arrays): a possible way back in.
HOST_MADE_OPS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy", "aten::lift"})
# a storage the tracker never saw made: host-made, or one a launch or the harness made
UNSEEN = "a tensor made outside PyTorch's ops (e.g. torch.from_numpy) or not the candidate's"
SAMPLE_FIRST = 4
SAMPLE_SHARE = 0.125
_RANDOM = random.random  # held: tamper.py watches the random module too
_AUDITED = ("ctypes.", "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn",
            "os.fork", "os.forkpty", "os.spawn")
_IGNORED_AUDIT = ("ctypes.dlopen", "ctypes.dlsym")


@dataclass
class Prov:
    """Where the values of one storage came from."""

    data: bool = False  # holds (something derived from) the run's data
    kernels: set[str] = field(default_factory=set)  # candidate kernels that wrote it
    ops: set[str] = field(default_factory=set)  # compute on data that flowed into it
    host: set[str] = field(default_factory=set)  # values made outside PyTorch's ops
    # PyTorch compute on constants (no data) that flowed into it: a table of the op over
    # every value of the dtype is such a constant, and carries the answer
    tables: set[str] = field(default_factory=set)

    def merge(self, other: Prov) -> None:
        self.data |= other.data
        self.kernels |= other.kernels
        self.ops |= other.ops
        self.host |= other.host
        self.tables |= other.tables

    def copy(self) -> Prov:
        return Prov(self.data, set(self.kernels), set(self.ops), set(self.host),
                    set(self.tables))


@dataclass
class Launch:
    kernel: str
    candidate: bool
    signature: tuple[Any, ...]  # grid, scalar args, tensor shapes/dtypes: the work done


_key = launch_plan.storage_key  # one definition of a storage's identity and of a
_storage_key = launch_plan.storage_key_of  # value's tensors, shared with the launch plan


def _all_views(outs: list[torch.Tensor], read: list[torch.Tensor]) -> bool:
    """Whether every output shares its storage with a tensor the op read."""
    keys = {_key(t) for t in read}
    return all(_key(t) in keys for t in outs)


def _pointer_objects(value: Any) -> list[str]:
    """Launch arguments Triton reads as pointers (they have ``data_ptr``) that are neither
    tensors nor a descriptor around one: their data reaches the kernel past the tracker."""
    odd = []
    for leaf in tree_leaves(value):
        if isinstance(leaf, torch.Tensor) or isinstance(getattr(leaf, "base", None),
                                                        torch.Tensor):
            continue
        if callable(getattr(leaf, "data_ptr", None)):
            odd.append(type(leaf).__name__)
    return odd


_tensors = launch_plan.tensors


class Tracker(TorchDispatchMode):
    """Provenance of every storage while the candidate's code runs (see the module doc)."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """False: torch would otherwise wrap __torch_dispatch__ to keep torch.compile out,
        importing torch._dynamo on the first op (seconds per worker) for a mode that never
        compiles anything."""
        return False

    def __init__(self, candidate_file: str) -> None:
        super().__init__()
        self.candidate_file = candidate_file
        # whether the op takes input-free factors that callers compute in PyTorch (RoPE's
        # cos/sin of positions): Task.torch_constants
        self.torch_constants = False
        self.provs: dict[tuple[int, int], Prov] = {}
        self.active = False  # recording a run() call (or the candidate's import)
        self.depth = 0  # >0 inside a Triton launch: its own host copies are not the candidate's
        self.counterfactual = False  # the counterfactual call (its launches run on shadows)
        self.shadows: dict[Any, torch.Tensor] = {}  # storage key -> its decoy copy
        self.input_keys: set[Any] = set()  # the call's inputs' storages (never written back)
        self.launches: list[Launch] = []
        self.compute_seen: set[str] = set()  # compute on data, reaching an output or not
        self.escapes: list[str] = []
        self.made: set[tuple[int, int]] = set()  # storages made during this call
        # storages whose provenance this call set (inputs, op results, launch arguments):
        # an address freed and handed out again unseen (torch work the mode did not see)
        # keeps the entry of what lived there before, which must not make it "data"
        self.touched: set[tuple[int, int]] = set()
        self._thread = threading.get_ident()
        # timing: launches of the candidate's kernels counted, a sample of them described
        self.counting = False
        self.counted = 0
        self.sampled: set[tuple[Any, ...]] = set()
        # one checked call's launch plan, while it is recorded (launch_plan.py)
        self.plan: launch_plan.Plan | None = None
        # fresh allocations zeroed rather than drawn, on every other checked call: a
        # user's large torch.empty is fresh zero pages, the judge's a random draw, and a
        # kernel that reads one to tell them apart must meet both
        self.zero_fresh = False
        # or, on every third, the bytes of an earlier call's output of the same size: a
        # kernel that trusts what its output buffer already holds (rows that already sum
        # to 1) returns the last answer (red team 9)
        self.stale_fresh: list[torch.Tensor] = []
        # while set: a weak reference to every storage an allocation op makes (what a
        # call leaves alive after it returns: Worker.check_outputs_freed)
        self.allocated: list[Any] | None = None

    # -- what the candidate's host code does ---------------------------------------
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self.active and (not self.depth or self._candidates_inside()):
            self._record(func, args, kwargs, out)
        return out

    def _watching(self) -> bool:
        """Whether what happens now is the candidate's to record: a recorded call, on the
        tracker's thread, outside a launch or inside one by the candidate's own code."""
        return self.active and threading.get_ident() == self._thread \
            and (not self.depth or self._candidates_inside())

    def _candidates_inside(self) -> bool:
        """Inside a launch (or the tracker's own work), whether this op is the candidate's
        all the same: Triton calls a kernel's pre-run hooks and grid function, and its
        launch hooks, inside the launch with the launch's arguments, so a torch result
        made there is the candidate's compute. The innermost frame of the candidate's
        file or of this module decides: this module's frames are the tracker's own work
        (decoys, poison), Triton's and torch's frames are passed over."""
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename == self.candidate_file:
                return True
            if filename == __file__:
                return False
            frame = frame.f_back  # type: ignore[assignment]
        return False

    def _record(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        schema = func._schema
        name = schema.name
        written_names = {a.name for a in schema.arguments
                         if a.alias_info is not None and a.alias_info.is_write}
        written = [t for a, v in zip(schema.arguments, args, strict=False)
                   if a.name in written_names for t in _tensors(v)]
        written += [t for k, v in kwargs.items() if k in written_names for t in _tensors(v)]
        written_ids = {id(t) for t in written}
        read = [t for t in _tensors((args, kwargs)) if id(t) not in written_ids]
        outs = [t for t in _tensors(out) if id(t) not in written_ids]
        if self.plan is not None and not self.depth and name in REPLAYED_OPS:
            self.depth += 1  # the plan's own copies are not the candidate's ops
            try:
                self.plan.op(func, args, kwargs, out)
            finally:
                self.depth -= 1
        if name in ALLOCATION_OPS:
            result = Prov()
            if self.allocated is not None and not self.depth:
                from torch.multiprocessing.reductions import StorageWeakRef

                self.allocated.extend((StorageWeakRef(t.untyped_storage()), t.nbytes)
                                      for t in outs)
            if name in _POISONED:  # in every recorded call: the counterfactual's look the same
                self._poison(outs)
        elif name in HOST_MADE_OPS:
            result = Prov(host={f"{name} (torch.tensor / as_tensor of host values)"})
        elif getattr(func, "is_view", False) and _all_views(outs, read):
            return  # same storage, same values
        elif name in MOVEMENT_OPS or getattr(func, "is_view", False):
            # a composite "view" op that copied (x.to(dtype), x.reshape of a transposed
            # x: under inference_mode the mode sees aten::to, not _to_copy) moves values
            if name == "aten::_local_scalar_dense" and read:  # .item(): a value on the host
                self.host_read("Tensor.item", read[0])
            result = self._union(read)
        else:
            result = self._union(read)
            if result.data or result.host:
                result.ops.add(name)
                result.data = True
                self.compute_seen.add(name)
            elif name not in RANGE_OPS:
                result.tables.add(name)
        for t in written:
            self.prov(t).merge(result)
            self._touch(t)
        for t in outs:
            key = _key(t)
            if key is not None:
                self.provs[key] = result.copy()
                self.made.add(key)
                self.touched.add(key)

    def _touch(self, t: torch.Tensor) -> None:
        key = _key(t)
        if key is not None:
            self.touched.add(key)

    def _union(self, tensors: list[torch.Tensor]) -> Prov:
        total = Prov()
        for t in tensors:
            total.merge(self.prov(t))
        return total

    def _poison(self, outs: list[torch.Tensor]) -> None:
        self.depth += 1
        try:
            for t in outs:
                stale = next((o for o in self.stale_fresh if o.nbytes == t.nbytes
                              and o.device == t.device), None) \
                    if not self.counterfactual and t.is_contiguous() else None
                if self.zero_fresh and not self.counterfactual:
                    t.zero_()
                elif stale is not None:
                    t.view(-1).view(torch.uint8).copy_(
                        stale.contiguous().view(-1).view(torch.uint8))
                elif t.is_floating_point():
                    t.copy_(_decoy(t, t.numel(), scaled=False).view(t.shape))
                elif t.is_complex():
                    t.fill_(float("nan"))
                elif t.dtype != torch.bool:
                    t.fill_(-7)
        finally:
            self.depth -= 1

    def prov(self, t: torch.Tensor) -> Prov:
        """A storage never seen being made is host-made (from_numpy, the harness's own)."""
        key = _key(t)
        if key is None:
            return Prov()
        if key not in self.provs:
            self.provs[key] = Prov(host={UNSEEN})
        return self.provs[key]

    def mark_input(self, t: torch.Tensor) -> None:
        key = _key(t)
        if key is not None:
            self.provs[key] = Prov(data=True)
            self.touched.add(key)

    def mark_known(self, t: torch.Tensor) -> None:
        """A harness-side constant the candidate may legitimately hold (none today)."""
        key = _key(t)
        if key is not None:
            self.provs.setdefault(key, Prov())

    # -- the launch side ----------------------------------------------------------
    def launch(self, fn: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               do_launch: Callable[..., Any]) -> Any:
        if self.counting and not self.depth:
            self._count(fn, grid, args, kwargs)
        if not self._watching():
            return do_launch()
        name, where = _kernel_identity(fn)
        own = where == self.candidate_file
        tensors = _tensors((args, kwargs))
        if odd := _pointer_objects((args, kwargs)):
            self.escapes.append(f"a launch of {name} was given {', '.join(sorted(set(odd)))}, "
                                "not a tensor but read as a pointer: its data is out of "
                                "sight; pass tensors")
        # what torch computed on the data, or made from host values, and handed to the
        # kernel stays with what the kernel writes: a torch result copied out by a kernel
        # is still torch's (which argument a kernel writes is not known: all of them). A
        # storage merely never seen made is not carried: launches and the harness make
        # those (the dispatch mode stepped out of is refused in forbidden.py)
        carried = Prov()
        for t in tensors:
            prov = self.provs.get(_key(t) or (0, 0))
            if prov is not None:
                carried.ops |= prov.ops
                carried.host |= prov.host - {UNSEEN}
                carried.tables |= prov.tables
        self.launches.append(Launch(name, own, _signature(grid, args, kwargs)))
        if self.plan is not None and not self.counterfactual:
            self.depth += 1
            try:
                self.plan.add_launch(do_launch, args, kwargs,
                                     identity=(name, self.launches[-1].signature))
            finally:
                self.depth -= 1
        result = None
        self.depth += 1
        try:
            # the counterfactual call launches too, on decoy copies of every float
            # tensor that holds data: a kernel's answer is wrong, while what else it writes
            # (a probe's flag) is written as in any call
            if not self.counterfactual:
                result = do_launch()
            elif (shadowed := self._shadowed(args, kwargs)) is not None:
                result = do_launch(*shadowed)
                self._write_back(tensors)
            # else: data reached some way no shadow covers; the launch is skipped
        finally:
            self.depth -= 1
        for t in tensors:
            prov = self.prov(t)
            self._touch(t)
            prov.data = True
            prov.ops |= carried.ops
            prov.host |= carried.host
            prov.tables |= carried.tables
            if own:
                prov.kernels.add(name)
            else:
                prov.ops.add(f"Triton kernel {name} from {where} (not the candidate's)")
        return result

    def _shadowed(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                  ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """The launch's arguments with each floating tensor that holds data (an input,
        or what a copy or a kernel made from one) replaced by the same view of a decoy
        of its storage, inside a host-side TensorDescriptor too. Integer tensors
        (positions, indices) stay: decoys there would send an honest kernel out of
        bounds. None where such a tensor is held by something else, which no shadow
        would reach: that launch is skipped instead."""
        missed = False

        def swap(leaf: Any) -> Any:
            nonlocal missed
            if isinstance(leaf, torch.Tensor):
                return self._shadow(leaf)
            base = getattr(leaf, "base", None)
            if isinstance(base, torch.Tensor) and (shadow := self._shadow(base)) is not base:
                if dataclasses.is_dataclass(leaf) and not isinstance(leaf, type):
                    return dataclasses.replace(leaf, base=shadow)
                missed = True
            return leaf

        swapped = tree_map(swap, (args, kwargs))
        return None if missed else swapped

    def decoys(self, inputs: list[Any]) -> list[Any]:
        """Copies of the counterfactual call's inputs as its launches will see them (each
        float data tensor's decoy), for the reference on them: call inside ``call``,
        before run()."""
        self.depth += 1
        try:
            return [self._shadow(t).clone() if isinstance(t, torch.Tensor) else t
                    for t in inputs]
        finally:
            self.depth -= 1

    def _write_back(self, tensors: list[torch.Tensor]) -> None:
        """What a counterfactual launch wrote into a decoy reaches the tensor it stands for,
        where that tensor was made in this call (an output, a scratch buffer): a second
        kernel that copies an answer made elsewhere into an output a first kernel wrote
        must land it there, where the check reads it. The inputs stay as drawn, and what
        the candidate keeps across calls (a cached table) is not overwritten."""
        for t in tensors:
            key = _key(t)
            if key is None or key not in self.made or key in self.input_keys \
                    or key not in self.shadows:
                continue
            t.copy_(self.shadows[key].as_strided(t.shape, t.stride(), t.storage_offset()))

    def _shadow(self, t: torch.Tensor) -> torch.Tensor:
        """The same view of a decoy of ``t``'s storage, or ``t`` itself where it is no
        float data."""
        if not t.dtype.is_floating_point:
            return t
        key = _key(t)
        prov = self.provs.get(key) if key is not None else None
        if prov is None or not prov.data or key not in self.touched:
            return t
        shadow = self.shadows.get(key)
        if shadow is None:
            shadow = _decoy(t, t.untyped_storage().nbytes() // t.element_size())
            self.shadows[key] = shadow
        return shadow.as_strided(t.shape, t.stride(), t.storage_offset())

    def _count(self, fn: Any, grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Cheap enough for the timed calls: a counter; the first launches and then one in
        eight at random (a candidate cannot tell which) described in full."""
        name, where = _kernel_identity(fn)
        if where != self.candidate_file:
            return  # the parent, re-timed beside the candidate
        self.counted += 1
        if self.counted <= SAMPLE_FIRST or _RANDOM() < SAMPLE_SHARE:
            self.sampled.add((name, _signature(grid, args, kwargs)))

    def host_read(self, what: str, t: Any) -> None:
        """``t`` a tensor or a storage (``storage().tolist()`` reads it whole)."""
        storage = t if isinstance(t, torch.UntypedStorage) else \
            getattr(t, "_untyped_storage", None)  # a TypedStorage's
        key = (_storage_key(storage) if storage is not None
               else _key(t) if isinstance(t, torch.Tensor) else None)
        prov = self.provs.get(key) if key is not None else None
        if prov is not None and prov.data and self._watching():
            self.escapes.append(f"{what}() read the data on the host")

    def host_made(self, what: str, t: Any) -> None:
        """``t`` made from host memory past PyTorch's ops (``torch.frombuffer``,
        ``from_numpy``, ``from_dlpack``): host values, as ``torch.tensor``'s are, whatever
        route filled the host memory (a read this tracker does not wrap included)."""
        key = _key(t) if isinstance(t, torch.Tensor) else None
        if key is None or not self._watching():
            return
        if key in self.touched and self.provs[key].host:
            return  # an op the mode saw named it already (from_numpy's aten::lift_fresh)
        self.provs[key] = Prov(host={f"{what} (a tensor of host memory)"})
        self.made.add(key)
        self.touched.add(key)

    def audit(self, event: str, args: Any) -> None:
        if not event.startswith(_AUDITED) or event.startswith(_IGNORED_AUDIT):
            return  # first: the frame lookup below raises an audit event of its own
        if self._watching():
            self.escapes.append(f"{event} ran inside run()")

    # -- one call -------------------------------------------------------------------
    @contextmanager
    def call(self, inputs: list[Any], *, counterfactual: bool = False) -> Iterator[None]:
        """Record one run() call on ``inputs``."""
        for t in _tensors(inputs):
            self.mark_input(t)
        self.input_keys = {k for t in _tensors(inputs) if (k := _key(t)) is not None}
        self.launches, self.compute_seen, self.escapes, self.made = [], set(), [], set()
        self.touched = set(self.input_keys)
        self.shadows = {}
        self.counterfactual = counterfactual
        if counterfactual:  # every data input's decoy made now: decoys() hands them out
            self.depth += 1
            try:
                for t in _tensors(inputs):
                    self._shadow(t)
            finally:
                self.depth -= 1
        self.active = True
        try:
            with self:
                yield
        finally:
            self.active = False
            self.counterfactual = False
            self.shadows = {}

    def warm_up(self) -> None:
        """Enter the mode once, before tamper.py's snapshot, so that anything its first
        use imports lazily is no change."""
        with self.call([]):
            torch.empty(1).add_(1)

    @contextmanager
    def importing(self) -> Iterator[None]:
        """The candidate's import: what it makes there cannot depend on any data."""
        self.active = True
        try:
            with self:
                yield
        finally:
            self.active = False

    def violation(self, outputs: list[torch.Tensor],
                  written_inputs: list[torch.Tensor] = ()) -> str | None:  # type: ignore[assignment]
        """Why the outputs (and the inputs the op writes, e.g. a KV cache) break the rule."""
        if self.escapes:
            return _trim_list(list(dict.fromkeys(self.escapes))) + f"; {RULE}"
        if not any(launch.candidate for launch in self.launches):
            foreign = sorted({launch.kernel for launch in self.launches})
            extra = f" (only kernels not defined in it: {', '.join(foreign)})" if foreign else ""
            ran = f"; PyTorch compute that ran: {_trim_list(sorted(self.compute_seen))}" \
                if self.compute_seen else ""
            return f"no Triton kernel of the candidate launched inside run(){extra}{ran}; {RULE}"
        for i, t in enumerate(outputs):
            prov = self.prov(t)
            if prov.ops:
                return (f"{_trim_list(sorted(prov.ops))} ran inside run() on the data and "
                        f"its result reached output {i}; {RULE}")
            if prov.host:
                return (f"output {i} holds values from {_trim_list(sorted(prov.host))}; "
                        f"{RULE}")
            if prov.tables and not self.torch_constants:
                return (f"{_trim_list(sorted(prov.tables))} computed a constant in PyTorch "
                        f"(at the import or in run()) that reached output {i}: this op "
                        f"takes no precomputed factors, and a table of it over the dtype's "
                        f"values would carry the answer; compute it in a Triton kernel; "
                        f"{RULE}")
            if not prov.kernels and t.numel():
                launched = _trim_list(sorted({x.kernel for x in self.launches}))
                return (f"output {i} was not written by any Triton kernel of the candidate "
                        f"(kernels launched: {launched}); {RULE}")
        for t in written_inputs:
            prov = self.prov(t)
            if prov.ops or prov.host:
                why = _trim_list(sorted(prov.ops | prov.host))
                return f"{why} wrote into an input the op updates in place; {RULE}"
        return None

    def kept_outputs(self, outputs: list[torch.Tensor]) -> list[int]:
        """Outputs whose storage was not made during this call: a buffer kept from an
        earlier call or the import, whose next use overwrites what the caller holds."""
        kept = []
        for i, t in enumerate(outputs):
            key = _key(t)
            if key is not None and key not in self.made:
                kept.append(i)
        return kept

    def tampered(self) -> str | None:
        """Why this tracker no longer records faithfully (state set from outside), or None.
        Checked between calls, when nothing may be in flight."""
        if _TRACKER is not self:
            return "the provenance tracker was replaced"
        if self.depth or self.active or self.counterfactual or self.counting:
            return "the provenance tracker's state was changed"
        if any(callable(v) for v in vars(self).values()):
            return "a method of the provenance tracker was overridden"
        return None

    def signatures(self, own_only: bool = False) -> list[tuple[Any, ...]]:
        return [(x.kernel, x.signature) for x in self.launches if x.candidate or not own_only]


def _trim_list(items: list[str], keep: int = 4) -> str:
    extra = f" and {len(items) - keep} more" if len(items) > keep else ""
    return ", ".join(items[:keep]) + extra


def _kernel_identity(fn: Any) -> tuple[str, str]:
    inner = getattr(fn, "fn", fn)
    code = getattr(inner, "__code__", None)
    name = getattr(inner, "__name__", type(fn).__name__)
    return name, code.co_filename if code is not None else "<unknown>"


def _signature(grid: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor):
            return ("tensor", tuple(v.shape), tuple(v.stride()), str(v.dtype))
        if isinstance(v, (int, float, bool, str, type(None))):
            return v
        return type(v).__name__

    grid_sig = tuple(grid) if isinstance(grid, (tuple, list)) else "callable"
    return (grid_sig, tuple(one(a) for a in args),
            tuple(sorted((k, one(v)) for k, v in kwargs.items())))


# -- installing the hooks ---------------------------------------------------------------
_TRACKER: Tracker | None = None
_INSTALLED = False


def install(candidate_file: str, torch_constants: bool = False) -> Tracker:
    """A fresh tracker for one candidate (of a task whose ``torch_constants`` says whether
    its op takes precomputed factors); the launch paths and host escapes are wrapped once
    per process (the wrappers do nothing while no call is recorded)."""
    global _TRACKER, _INSTALLED
    tracker = Tracker(candidate_file)
    tracker.torch_constants = torch_constants
    _TRACKER = tracker
    if not _INSTALLED:
        _wrap_launchers()
        _wrap_host_reads()
        _wrap_host_made()
        sys.addaudithook(_audit)
        _INSTALLED = True
    return tracker


def _decoy(like: torch.Tensor, numel: int, scaled: bool = True) -> torch.Tensor:
    """``numel`` values of ``like``'s dtype, a fresh random draw at its scale and within its
    range (``scaled``: from a sample of its storage; else a standard normal draw, for memory
    that holds nothing yet). Why not NaN: a candidate that reads its own output for NaN
    tells the counterfactual call apart and is honest only there; a decoy reads like any
    other data, and a kernel that computes from it gives an answer that is finite and
    wrong. Made in ``like``'s own dtype, with statistics from a sample: a shadow of a large
    input costs no more memory than the input."""
    mean, std = 0.0, 1.0
    low: float | None = None
    high: float | None = None
    if scaled:
        whole = like.new_empty(0).set_(like.untyped_storage())  # the storage, no copy
        sample = whole[:_DECOY_SAMPLE].float()
        finite = sample[sample.isfinite()]
        if finite.numel() > 1:
            mean, std = float(finite.mean()), float(finite.std())
            low, high = float(finite.min()), float(finite.max())
        std = std if math.isfinite(std) and std > 0 else 1.0
    generator = torch.Generator(device=like.device)
    generator.manual_seed(secrets.randbits(63))
    draw = torch.randn(numel, generator=generator, device=like.device, dtype=like.dtype)
    draw.mul_(std).add_(mean)
    if low is not None and high is not None and low < high:
        draw.clamp_(low, high)
    return draw


def _audit(event: str, args: Any) -> None:
    if _TRACKER is not None:
        _TRACKER.audit(event, args)


def _wrap_launchers() -> None:
    from triton.runtime.jit import JITFunction

    owners: list[Any] = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        owners.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - every supported triton has the interpreter
        pass
    for owner in owners:
        original = owner.run

        def run(self: Any, *args: Any, grid: Any, warmup: Any, _original: Any = original,
                **kwargs: Any) -> Any:
            def go(args: tuple[Any, ...] = args, kwargs: dict[str, Any] = kwargs) -> Any:
                return _original(self, *args, grid=grid, warmup=warmup, **kwargs)
            if warmup or _TRACKER is None:
                return go()
            return _TRACKER.launch(self, grid, args, kwargs, go)

        owner.run = run
    _wrap_compiled_runner()


def _wrap_compiled_runner() -> None:
    """``kernel.warmup(...)[grid](...)`` launches a compiled kernel without JITFunction.run."""
    try:
        from triton.compiler.compiler import CompiledKernel
    except ImportError:  # pragma: no cover
        return
    original = CompiledKernel.__getitem__

    def getitem(self: Any, grid: Any) -> Any:
        runner = original(self, grid)

        def launch(*args: Any, **kwargs: Any) -> Any:
            if _TRACKER is None:
                return runner(*args, **kwargs)
            fn = getattr(getattr(self, "src", None), "fn", self)
            return _TRACKER.launch(fn, grid, args, kwargs,
                                   lambda a=args, k=kwargs: runner(*a, **k))

        return launch

    CompiledKernel.__getitem__ = getitem


def _wrap_host_made() -> None:
    """Ways host memory becomes a tensor without an op the dispatch mode sees."""
    import torch.utils.dlpack

    for owner, name in ((torch, "frombuffer"), (torch, "from_numpy"),
                        (torch, "from_dlpack"), (torch.utils.dlpack, "from_dlpack"),
                        (torch, "as_tensor"), (torch, "asarray")):
        original = getattr(owner, name)

        def wrapper(*args: Any, _original: Any = original,
                    _name: str = f"torch.{name}", **kwargs: Any) -> Any:
            made = _original(*args, **kwargs)
            if _TRACKER is not None and not (args and isinstance(args[0], torch.Tensor)):
                _TRACKER.host_made(_name, made)  # (as_tensor of a tensor is that tensor)
            return made

        setattr(owner, name, wrapper)


def _wrap_host_reads() -> None:
    """Ways a tensor's or a storage's values reach the host past the dispatch mode."""
    import torch.utils.dlpack

    for owner, name in ((torch.Tensor, "numpy"), (torch.Tensor, "tolist"),
                        (torch.Tensor, "__dlpack__"), (torch.UntypedStorage, "tolist"),
                        (torch.TypedStorage, "tolist"),
                        # Python over the memory, no ATen op: the values reach the host
                        (torch.Tensor, "apply_"), (torch.Tensor, "map_"),
                        (torch.Tensor, "map2_")):
        original = getattr(owner, name)

        def wrapper(self: Any, *args: Any, _original: Any = original,
                    _name: str = f"{owner.__name__}.{name}", **kwargs: Any) -> Any:
            if _TRACKER is not None:
                _TRACKER.host_read(_name, self)
            return _original(self, *args, **kwargs)

        setattr(owner, name, wrapper)
    to_dlpack = torch.utils.dlpack.to_dlpack

    def to_dlpack_read(t: Any, *args: Any, **kwargs: Any) -> Any:
        if _TRACKER is not None:
            _TRACKER.host_read("torch.utils.dlpack.to_dlpack", t)
        return to_dlpack(t, *args, **kwargs)

    torch.utils.dlpack.to_dlpack = to_dlpack_read  # type: ignore[assignment]
