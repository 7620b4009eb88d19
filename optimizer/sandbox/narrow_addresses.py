"""Address offsets that may wrap in 32 bits (a product or sum not proved in range), refused.

Why: Triton types an integer argument under 2**31 and ``tl.program_id`` as int32, so
``row * stride`` is a 32-bit multiply, and it wraps once the product passes 2**31 elements:
a tensor of that size, or a slice of a larger one whose rows stand a whole prompt apart
(``logits[:, -1, :]``). The judge's wide shape and far-apart rows find such offsets by
running them, but only on the layouts they lay out; a kernel can keep its 32-bit offsets
on a path those layouts do not take (few rows, long rows, the output, a written cache, a
transposed weight's columns, rows relative to a program's base: red team 15), or build
them where no run reaches (a specialised K, a launch split in two: red team 16; additions,
a prefix sum, a while loop, an atomic cursor: red team 17). The rule here holds on every
path the kernel compiles: every 32-bit value that reaches an address must be proved in
range. Widening the run-time factor first (``pid.to(tl.int64) * BLOCK``,
``row.to(tl.int64) * stride``) makes the arithmetic 64-bit and clean.

How: the kernel's TTIR (``CompiledKernel.asm["ttir"]`` on a GPU; under the CPU
interpreter, the same frontend run on the launch's argument types, ``launch_findings``)
is read as text, one op a line, keeping a bound on each integer value's magnitude where
one follows from constants, ``tl.arange``, the grid's y and z program ids and the ops
over them (each other 32-bit value is only under 2**31 as it stands). A 32-bit (or
narrower) value may wrap when it is: a ``muli`` / ``shli`` whose bound is not proved
under 2**31 (``row * stride``, and since red team 16 ``pid * BLOCK``, ``rows * K_DIM``);
an ``addi`` / ``subi`` whose bound reaches 2**32 (``stride + stride``: red team 17); a
value carried round a loop (``scf.for`` and ``scf.while`` arguments, any region's block
arguments: an offset stepped by a stride holds that product); the result of a scan or
reduction that adds 32-bit values (``tl.cumsum``); 32-bit arithmetic on a value loaded
from memory or returned by an atomic (the value itself is an exact offset); a float cast
to it or a wider integer cut to it. What any integer op computes from such a value may
wrap too, widened or not; a ``tt.addptr`` whose offset may wrap is the finding, named by
its line in the source (or the loop variable's name).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any

from kernelkb.optimizer.sandbox.errors import NarrowAddress

__all__ = ["NarrowAddress", "findings", "launch_findings", "message", "source_files"]

_OP = re.compile(r"^\s*(%[\w.$-]+)(?::(\d+))?\s*=\s*\"?([\w.]+)\"?(.*)$")
_VALUE = re.compile(r"%[\w.$-]+(?:#\d+)?")
_LOC_REF = re.compile(r"loc\((#loc\d*)\)\s*$")
_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_FILE_LINE = re.compile(r"\"([^\"]+)\":(\d+):(\d+)")
_CALLSITE = re.compile(r"^callsite\((#loc\d*|.+?) at (#loc\d*|.+)\)$")
_ITER_ARG = re.compile(r"(%[\w.$-]+)\s*=\s*(%[\w.$-]+(?:#\d+)?)")
# ops that pass a constant on as a constant (a splat of 128 is still 128)
_SHAPING = {"tt.splat", "tt.broadcast", "tt.expand_dims", "tt.reshape", "arith.extsi",
            "arith.extui", "arith.trunci", "arith.index_cast"}
_NARROW_OPS = {"arith.muli", "arith.shli"}
# 32-bit values of any size, which an offset may not be built from either
_LOADED = "32-bit arithmetic on a value loaded from memory"
_UNBOUNDED = {"arith.fptosi": "a float cast to a 32-bit integer",
              "arith.fptoui": "a float cast to a 32-bit integer",
              "arith.trunci": "a wider integer cut to 32 bits"}
_RESULT_TYPES = re.compile(r"->\s*\(([^)]*)\)")


def _is_narrow(types: str) -> bool:
    """The op's result type (after its last ' : ') is an integer of 32 bits or fewer
    (``i32``, ``tensor<64x1xi16>``)."""
    tail = types.rsplit(" : ", 1)[-1].split(" loc(", 1)[0].strip()
    return re.fullmatch(r"(?:tensor<[\dx]*x)?i(?:8|16|32)>?", tail) is not None


def _integer(types: str) -> bool:
    tail = types.rsplit(" : ", 1)[-1].split(" loc(", 1)[0]
    return bool(re.search(r"(?:^|x|\s|,|\()i(?:1|8|16|32|64)\b", tail))


def _operands(rest: str) -> list[str]:
    body = rest.split(" : ", 1)[0]
    return _VALUE.findall(body.split(" loc(", 1)[0])


def findings(ttir: str) -> list[str]:
    """Where an address offset may have wrapped in 32 bits: ``line 12 of file.py`` (or
    the op's text where the IR carries no location), once each, in order."""
    reading = _Reading(_locations(ttir))
    for line in ttir.splitlines():
        reading.read(line)
    return reading.found


class _Reading:
    """One kernel's IR read top to bottom, one op a line: what each value is known to
    be (a constant, a bound on its magnitude, loaded from memory, possibly wrapped)."""

    def __init__(self, locs: dict[str, str]) -> None:
        self.locs = locs
        self.constant: set[str] = set()
        self.positive: set[str] = set()  # constants above zero (a cdiv's divisor)
        self.bound: dict[str, int] = {}  # value -> a bound on its magnitude, where known
        self.narrow: dict[str, str] = {}  # value -> where it may have wrapped
        self.loaded: set[str] = set()  # 32-bit values loaded (or only reshaped since)
        self.found: list[str] = []
        self.folding: list[str] = []  # the results of the scan or reduction being read
        self.folded = False  # whether its combine adds or multiplies 32-bit values

    def read(self, line: str) -> None:
        if line.lstrip().startswith("^"):  # a region's arguments: a loop's carried values
            for arg, types in _BLOCK_ARG.findall(line):
                if _is_narrow(f" : {types}"):
                    self.narrow[arg] = _carried(arg)
            return
        if line.lstrip().startswith("})"):
            if self.folded:  # a prefix sum or a total of 32-bit values
                for r in self.folding:
                    self.narrow[r] = f"{_place(line, self.locs)} ({_FOLDED})"
            self.folding, self.folded = [], False
        match = _OP.match(line)
        if not match:
            return
        name, count, op, rest = match.groups()
        results = [f"{name}#{i}" for i in range(int(count))] if count else [name]
        if op in ("tt.scan", "tt.reduce"):
            self.folding = results
        elif op in ("scf.for", "scf.while"):
            self._loop(op, name, rest, results)
        else:
            self._value(line, op, rest, results, _operands(rest))

    def _loop(self, op: str, name: str, rest: str, results: list[str]) -> None:
        """A 32-bit value carried round a loop holds what its steps add up to (an offset
        stepped by a stride is that stride times the steps taken)."""
        if op == "scf.while":
            header = rest.split(" : ", 1)
            types = _carried_types(" -> (" + header[1].split(") ->", 1)[0].lstrip(" (") + ")") \
                if len(header) > 1 else []
            for i, (arg, _init) in enumerate(_ITER_ARG.findall(header[0])):
                if i < len(types) and _is_narrow(f" : {types[i]}"):
                    self.narrow[arg] = _carried(arg)
            for i, r in enumerate(results):
                if i < len(types) and _is_narrow(f" : {types[i]}"):
                    self.narrow[r] = _carried(name)
            return
        _bound_induction(rest, self.bound)
        carried = _ITER_ARG.findall(rest.split("iter_args", 1)[-1]) \
            if "iter_args" in rest else []
        types = _carried_types(rest)
        for i, (arg, init) in enumerate(carried):
            if init in self.narrow:
                self.narrow[arg] = self.narrow[init]
            elif i < len(types) and _is_narrow(f" : {types[i]}"):
                self.narrow[arg] = _carried(arg)

    def _value(self, line: str, op: str, rest: str, results: list[str],
               operands: list[str]) -> None:
        """An op computing values: its results' bound, whether they may have wrapped
        (or inherit that from an operand), and an address built from such a value."""
        narrow32 = _is_narrow(rest)
        if self.folding and op in _SUM | _NARROW_OPS and narrow32:
            self.folded = True
        proved = _proved_bound(op, rest, operands, self.bound, self.positive)
        if proved is not None:  # a 32-bit value is under 2**31 whatever it was computed as
            self.bound.update(dict.fromkeys(results, min(proved, _LIMIT) if narrow32
                                            else proved))
        why = self._wraps(op, rest, results, operands, proved, narrow32)
        if why == _KNOWN:
            return
        if why is not None:
            place = _place(line, self.locs)
            for r in results:
                self.narrow[r] = place + why
            return
        if op == "tt.addptr" and len(operands) >= 2 and operands[1] in self.narrow:
            if self.narrow[operands[1]] not in self.found:
                self.found.append(self.narrow[operands[1]])
        tainted = [self.narrow[o] for o in operands if o in self.narrow]
        if tainted and _integer(rest):
            for r in results:
                self.narrow[r] = tainted[0]

    def _wraps(self, op: str, rest: str, results: list[str], operands: list[str],
               proved: int | None, narrow32: bool) -> str | None:
        """Why this op's 32-bit result may have wrapped, as a suffix to its place; None
        where it has not by itself (its operands may have); _KNOWN where the op only
        made a constant or a loaded value, which is recorded."""
        if op == "arith.constant":
            self.constant.update(results)
            if proved and not rest.lstrip().startswith(("-", "dense<-")):
                self.positive.update(results)
            return _KNOWN
        if op in _SHAPING and operands and all(o in self.constant for o in operands):
            self.constant.update(results)
            if all(o in self.positive for o in operands):
                self.positive.update(results)
            return _KNOWN
        if op in _NARROW_OPS and len(operands) >= 2 and narrow32:
            wraps = _product_may_wrap(op, operands[:2], self.constant, self.bound)
            if wraps is not None:
                return wraps
        if op in _LOADS and re.search(r"ptr<i(?:8|16|32)>", rest):
            self.loaded.update(results)  # exact as it is: an offset, not a sum of it
            return _KNOWN
        if self.loaded.intersection(operands) and narrow32:
            if op not in _SHAPING:
                return f" ({_LOADED})"  # 32-bit arithmetic on a value of any size
            self.loaded.update(results)
        if op in _SUM and len(operands) >= 2 and narrow32 and (proved or 0) >= 2 * _LIMIT:
            return f" ({_WIDE_SUM})"
        if op in _UNBOUNDED and narrow32 and (proved or _LIMIT) >= _LIMIT:
            return f" ({_UNBOUNDED[op]})"
        return None


_KNOWN = "\0"  # _Reading._wraps: a constant or a loaded value, recorded as such


_LIMIT = 2**31
# what a bound on the operands bounds: ops whose result is no larger than ...
_SAME = _SHAPING | {"arith.shrsi", "arith.shrui"}  # ... their first operand
_SUM = {"arith.addi", "arith.subi"}
_LARGER = {"arith.minsi", "arith.maxsi", "arith.minui", "arith.maxui"}  # ... the larger
_CONSTANT = re.compile(r"^\s*(?:dense<)?(-?\d+)\b")
_RANGE = re.compile(r"end = (-?\d+)\s*:.*start = (-?\d+)")
_INDUCTION = re.compile(r"^\s*(%[\w.$-]+)\s*=\s*(%[\w.$-]+)\s+to\s+(%[\w.$-]+)\s+step")
_BLOCK_ARG = re.compile(r"(%[\w.$-]+):\s*((?:tensor<[^>]*>|[\w]+))")
# what reads memory: a loaded value, or the old value an atomic returns
_LOADS = {"tt.load", "tt.atomic_rmw", "tt.atomic_cas"}
_FOLDED = "a 32-bit prefix sum or total over a block"
_WIDE_SUM = "a 32-bit sum of two values each up to 2**31"
_CONSTANT_PRODUCT = " (a run-time value times a constant, in 32 bits)"
_LARGE_PRODUCT = " (a 32-bit product whose factors' bounds pass 2**31)"


def _proved_bound(op: str, rest: str, operands: list[str], bound: dict[str, int],
                  positive: set[str]) -> int | None:
    """A bound on the magnitude of what ``op`` computes: from constants, ``tl.arange``,
    the grid's y and z program ids (CUDA caps them at 65,535), and integer ops over
    those and over 32-bit values (each under 2**31 as it stands, so ``tl.cdiv(N, BN) *
    GROUP`` is bounded where ``pid * BLOCK`` is not). None: nothing known beyond its
    type."""
    if op == "arith.constant":
        match = _CONSTANT.match(rest)
        return abs(int(match.group(1))) if match else None
    if op == "tt.make_range":
        match = _RANGE.search(rest)
        return max(abs(int(match.group(1))), abs(int(match.group(2)))) if match else None
    if op in ("tt.get_program_id", "tt.get_num_programs"):
        return 65_536 if re.match(r"\s*[yz]\b", rest) else None
    if not operands:
        return None
    known = [bound.get(o, _LIMIT) for o in operands]
    first, second = known[0], known[1] if len(known) > 1 else _LIMIT
    if op in ("arith.divui", "arith.remui", "arith.shrui") and first >= _LIMIT:
        first = 2 * _LIMIT  # a negative 32-bit value read unsigned is up to 2**32
    if op in _SAME:
        return first
    if op in ("arith.divsi", "arith.divui", "arith.ceildivsi", "arith.floordivsi"):
        return first // max(1, second) + 1 if operands[1] in positive else first
    if op in _SUM:
        return first + second
    if op == "arith.muli":
        return first * second
    if op == "arith.shli":
        return first << min(second, 64)
    if op in ("arith.remsi", "arith.remui"):
        return min(first, second)  # a remainder is smaller than its divisor
    if op in ("arith.andi", "arith.ori", "arith.xori"):
        return 2 * max(first, second)  # two's complement: under twice the larger
    if op in _LARGER:
        return max(first, second)
    if op == "arith.select" and len(known) >= 3:
        return max(known[1], known[2])
    return None


def _bound_induction(rest: str, bound: dict[str, int]) -> None:
    """An ``scf.for``'s induction variable lies between its bounds: proved where both
    are (``for k in range(0, K_TILES)`` with a constant count)."""
    match = _INDUCTION.match(rest)
    if match and match.group(2) in bound and match.group(3) in bound:
        proved = max(bound[match.group(2)], bound[match.group(3)])
        narrow = re.search(r":\s*i(?:8|16|32)\s*\{?\s*(?:loc\(.*)?$", rest)
        bound[match.group(1)] = min(proved, _LIMIT) if narrow else proved


def _product_may_wrap(op: str, factors: list[str], constant: set[str],
                      bound: dict[str, int]) -> str | None:
    """Why a 32-bit product (or shift) of ``factors`` may pass 2**31, as a suffix to its
    place ('' for two run-time values); None where its factors' bounds prove it cannot.
    A constant times a value nothing bounds below 2**31 may wrap as surely as two
    run-time values: ``pid * BLOCK`` passes 2**31 once the grid does, ``rows * K_DIM``
    once a specialised size is large (red team 16)."""
    left, right = (bound.get(f, _LIMIT) for f in factors)
    product = left << min(right, 64) if op == "arith.shli" else left * right
    if product < _LIMIT:
        return None
    if any(f in constant for f in factors):
        return _CONSTANT_PRODUCT
    return "" if min(left, right) >= _LIMIT else _LARGE_PRODUCT


def _carried(name: str) -> str:
    named = re.sub(r"_\d+$", "", name.lstrip("%"))
    return f"`{named}`, a 32-bit value carried round a loop"


def source_files(ttir: str) -> list[str]:
    """The files the IR's locations name."""
    return list(dict.fromkeys(m.group(1) for m in _FILE_LINE.finditer(ttir)))


def _carried_types(rest: str) -> list[str]:
    """The types of an ``scf.for``'s iteration arguments, in order."""
    match = _RESULT_TYPES.search(rest)
    return [t.strip() for t in re.split(r",\s*(?![^<]*>)", match.group(1))] if match else []


def _place(line: str, locs: dict[str, str]) -> str:
    return _where(line, locs) or line.strip().split(" loc(", 1)[0]


def _locations(ttir: str) -> dict[str, str]:
    """``#locN`` -> its text, to resolve an op's location to a file and line."""
    table = {}
    for line in ttir.splitlines():
        match = _LOC_DEF.match(line.strip())
        if match:
            table[match.group(1)] = match.group(2)
    return table


def _where(line: str, locs: dict[str, str]) -> str | None:
    match = _LOC_REF.search(line)
    place = _resolve(locs.get(match.group(1), "") if match else "", locs, 8)
    return f"line {place[1]} of {place[0].rsplit('/', 1)[-1]}" if place else None


def _resolve(text: str, locs: dict[str, str], depth: int) -> tuple[str, str] | None:
    """The file and line a location names, following references; of a call site, the
    callee's, unless that is Triton's own library (``tl.cumsum``'s add): the caller's."""
    if depth <= 0:
        return None
    call = _CALLSITE.match(text.strip())
    if call:
        callee = _resolve(locs.get(call.group(1), call.group(1)), locs, depth - 1)
        if callee and "/triton/" not in callee[0]:
            return callee
        return _resolve(locs.get(call.group(2), call.group(2)), locs, depth - 1) or callee
    place = _FILE_LINE.search(text)
    if place:
        return place.group(1), place.group(2)
    ref = re.search(r"#loc\d*", text)
    return _resolve(locs.get(ref.group(0), ""), locs, depth - 1) if ref else None


def message(kernel: str, found: list[str]) -> str:
    return (f"kernel {kernel} computes an address from a 32-bit product it cannot bound "
            f"below 2**31, or from a 32-bit value it cannot bound ({', '.join(found[:3])}): "
            "it wraps once the offset passes 2**31 elements, as it does for a large tensor "
            "or for rows a long stride apart (a slice of a larger tensor); widen the "
            "run-time factor first (`pid.to(tl.int64) * BLOCK`, `row.to(tl.int64) * "
            "stride`) (refused from its IR before it runs)")


# --- the CPU form: the interpreter compiles nothing, so its launch is compiled to TTIR

_TTIR_CACHE: dict[tuple, list[str] | None] = {}


def launch_findings(function: Any, args: tuple, kwargs: dict) -> list[str] | None:
    """The findings for one interpreted launch (``InterpretedFunction.run``'s arguments),
    its TTIR made by Triton's own frontend for the launch's argument types, once per
    kernel and signature; None where that frontend cannot make it here."""
    try:
        key, signature, constexprs = _signature(function, args, kwargs)
    except (TypeError, ValueError):
        return None
    if key not in _TTIR_CACHE:
        ttir = _ttir(function, signature, constexprs)
        _TTIR_CACHE[key] = findings(ttir) if ttir is not None else None
    return _TTIR_CACHE[key]


def _signature(function: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict, dict]:
    import inspect

    import torch

    fn = function.fn
    params = list(inspect.signature(fn).parameters.values())
    bound = dict(zip([p.name for p in params], args, strict=False))
    bound.update({k: v for k, v in kwargs.items() if k in {p.name for p in params}})
    for p in params:
        if p.name not in bound and p.default is not inspect.Parameter.empty:
            bound[p.name] = p.default
    signature, constexprs = {}, {}
    for p in params:
        value = bound.get(p.name)
        annotation = str(p.annotation)
        if "constexpr" in annotation or value is None:
            signature[p.name], constexprs[p.name] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[p.name] = "*" + _TRITON_DTYPES[value.dtype]
        elif isinstance(value, bool):
            signature[p.name] = "i1"
        elif isinstance(value, int):
            if value == 1:  # Triton specializes an argument equal to 1 as that constant
                signature[p.name], constexprs[p.name] = "constexpr", 1
            else:
                signature[p.name] = "i32" if -2**31 <= value < 2**31 else "i64"
        elif isinstance(value, float):
            signature[p.name] = "fp32"
        else:
            raise TypeError(f"{p.name}: {type(value).__name__}")
    key = (id(fn), tuple(signature.items()),
           tuple((k, repr(v)) for k, v in sorted(constexprs.items())))
    return key, signature, constexprs


def _ttir(function: Any, signature: dict, constexprs: dict) -> str | None:
    """Triton's frontend over the kernel, for a Hopper target (no GPU needed), with the
    kernels it calls compiled as kernels, not as the interpreter's functions."""
    try:
        return hopper_levels(function, signature, constexprs, ("ttir",))["ttir"]
    except Exception:  # noqa: BLE001 - this host's frontend cannot: the GPU's rule stays
        return None


def hopper_levels(function: Any, signature: dict, constexprs: dict,
                  levels: tuple[str, ...]) -> dict[str, str]:
    """The text of each of ``levels`` (in Triton's order: ttir, ttgir, llir, ptx) of an
    interpreted kernel compiled for a Hopper target on this host, no GPU needed (the
    first stage inlined and folded, as there)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource

    target = GPUTarget("cuda", 90, 32)
    backend = CUDABackend(target)
    options = backend.parse_options({})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    seen: dict[int, Any] = {}
    source = ASTSource(_compilable(function.fn, seen), signature=signature,
                       constexprs=constexprs)
    with _language_compiled(seen):
        module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                                backend.get_module_map(), context)
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options, source.language)
    texts: dict[str, str] = {}
    metadata: dict[str, Any] = {}
    for level in levels:
        module = stages[level](module, metadata)
        texts[level] = module if isinstance(module, str) else str(module)
    return texts


def _compilable(fn: Any, seen: dict[int, Any]) -> Any:
    """A JITFunction over ``fn`` whose globals name JITFunctions where the interpreter's
    module names its own wrappers (the helpers a kernel calls)."""
    import types

    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    if id(fn) in seen:
        return seen[id(fn)]
    namespace = dict(fn.__globals__)
    copy = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    jitted = seen[id(fn)] = JITFunction(copy)
    for name, value in fn.__globals__.items():
        if isinstance(value, InterpretedFunction):
            namespace[name] = _compilable(value.fn, seen)
    return jitted


_LANGUAGE = ("triton.language", "triton.language.standard", "triton.language.math",
             "triton.language.extra.cuda.libdevice")


@contextlib.contextmanager
def _language_compiled(seen: dict[int, Any]) -> Iterator[None]:
    """Triton's own library functions (``tl.max``, ``tl.sum``, ...) are the
    interpreter's wrappers too: while the frontend runs, each module names the compiled
    kind, and its own names come back after."""
    from triton.runtime.interpreter import InterpretedFunction

    swapped = []
    for owner, attr, original in _PRISTINE:  # what a run of the interpreter left patched
        value = getattr(owner, attr, _ABSENT)
        if value is not original:
            swapped.append((owner, attr, value))
            setattr(owner, attr, original)
    for name in _LANGUAGE:
        module = sys.modules.get(name)
        for attr, value in list(vars(module).items()) if module else ():
            if isinstance(value, InterpretedFunction):
                swapped.append((module, attr, value))
                setattr(module, attr, _compilable(value.fn, seen))
    try:
        yield
    finally:
        for owner, attr, value in reversed(swapped):
            if value is _ABSENT:
                delattr(owner, attr)
            else:
                setattr(owner, attr, value)


_ABSENT = object()


def _pristine() -> list[tuple[Any, str, Any]]:
    """Triton's language objects as imported: the interpreter patches them for each run
    and leaves some patched (Triton 3.9), which breaks its own frontend after."""
    try:
        import triton.language as tl
    except ImportError:
        return []
    owners = [tl, tl.core, tl.math, tl.tensor, tl.core.tensor_descriptor_base,
              getattr(tl, "standard", None), getattr(tl.core, "constexpr", None)]
    return [(owner, attr, value) for owner in owners if owner is not None
            for attr, value in list(vars(owner).items())]


_PRISTINE = _pristine()  # taken at this module's import: the worker's, before any run


def _dtypes() -> dict:
    import torch

    return {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32",
            torch.float64: "fp64", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32",
            torch.int64: "i64", torch.uint8: "u8", torch.bool: "i1",
            torch.float8_e4m3fn: "fp8e4nv", torch.float8_e5m2: "fp8e5"}


class _LazyDtypes(dict):
    def __missing__(self, key: Any) -> str:
        self.update(_dtypes())
        if key not in self:
            raise TypeError(f"no Triton type for {key}")
        return self[key]


_TRITON_DTYPES = _LazyDtypes()
