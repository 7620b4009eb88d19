"""The exported kernel's dispatch: a table regime -> configuration per GPU, by shape.

Why here and self-contained: ``optimizer/export.py`` writes this file's text verbatim into
every exported module, so the op dispatches with torch and triton alone (no KernelKB on
the serving host), the way serving engines ship per-device JSON tables beside their
Triton kernels. KernelKB imports it too (tests, ``kernelkb dispatch``). Every name is
prefixed ``dispatch_`` / ``Dispatch`` so it cannot clash with a kernel's own.

Per call the op pays one tuple of input sizes and one dict lookup: the regime, the table
entry and the loaded configuration are resolved once per distinct key and cached. Triton
launches inside a configuration go through a per-shape launch cache where the compiled
kernel is reused without Triton's per-call binding and cache-key work
(``dispatch_fast_launch``; off in the interpreter and with ``KERNELKB_FAST_LAUNCH=0``).
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import re
import tempfile
import typing
import warnings

from kernelkb.kernels.launch_hooks import plan_hook_test  # export: inlined above

DISPATCH_FORMAT = "kernelkb.dispatch/1"
DISPATCH_CACHE_MAX = 4096  # distinct shape keys cached per op before the cache restarts


def dispatch_regime(rule: dict, key: tuple) -> str:
    """The regime of a key (the rule's dims read from the inputs): product vs bounds."""
    value = 1
    for part in key:
        value *= int(part)
    for name, bound in rule["classes"]:
        if bound is None or value <= bound:
            return name
    raise ValueError(f"no regime for {key}: the last class must be unbounded")


def dispatch_check(table: dict) -> dict:
    """Raise ValueError naming what is wrong with a table; returns it when well-formed."""
    if not isinstance(table, dict) or table.get("format") != DISPATCH_FORMAT:
        raise ValueError(f"not a dispatch table: format must be {DISPATCH_FORMAT!r}")
    for field in ("task", "rule", "gpus"):
        if field not in table:
            raise ValueError(f"dispatch table: missing {field!r}")
    rule = table["rule"]
    names = [c[0] for c in rule.get("classes", [])]
    if not names or rule["classes"][-1][1] is not None:
        raise ValueError("dispatch table: rule.classes must end with an unbounded class")
    if len(rule.get("inputs", [])) != len(rule.get("dims", [])):
        raise ValueError("dispatch table: rule.inputs needs one (input, dim) per dim")
    if not isinstance(table["gpus"], dict):
        raise ValueError("dispatch table: gpus must be an object {gpu name: {...}}")
    for gpu, entry in table["gpus"].items():
        regimes = entry.get("regimes") if isinstance(entry, dict) else None
        if not isinstance(regimes, dict):
            raise ValueError(f"dispatch table: gpus[{gpu!r}].regimes must be an object")
        for regime, item in regimes.items():
            if regime not in names:
                raise ValueError(f"dispatch table: gpus[{gpu!r}] has regime {regime!r}, "
                                 f"not one of {names}")
            if not isinstance(item, dict) or not isinstance(item.get("config"), dict):
                raise ValueError(f"dispatch table: gpus[{gpu!r}].regimes[{regime!r}] "
                                 "needs a config object")
    return table


def dispatch_gpu_here() -> dict:
    """This process's device as the table names it: CUDA device 0's name, arch, SMs; or
    "cpu-interpreter" (the Triton interpreter, as KernelKB runs name it)."""
    import torch

    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return {"gpu_name": "cpu-interpreter", "arch": "cpu", "sm_count": None}
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {"gpu_name": props.name, "arch": f"sm_{props.major}{props.minor}",
            "sm_count": props.multi_processor_count}


def _gpu_distance(facts: dict, here: dict) -> tuple:
    arch, there = here.get("arch") or "", facts.get("arch") or ""
    family = arch[:4] == there[:4] and arch != "cpu"  # sm_9x vs sm_8x
    sms, other = here.get("sm_count"), facts.get("sm_count")
    spread = abs(math.log(sms / other)) if sms and other else math.inf
    return (arch != there, not family, spread)


def dispatch_gpu_order(table: dict, here: dict) -> list[str]:
    """The table's GPUs, most like ``here`` first: the same name, then the same
    architecture, the same architecture family, then the closest SM count."""
    gpus = table["gpus"]
    return sorted(gpus, key=lambda g: (g != here.get("gpu_name"),
                                       *_gpu_distance(gpus[g].get("facts", {}), here), g))


def dispatch_select(table: dict, here: dict, regime: str) -> tuple[str, str, dict, str | None]:
    """(gpu, regime, entry, why it is a fallback or None) for a call in ``regime`` here.

    Rules: the exact regime on this GPU; else the exact regime on the most similar GPU
    that has it, if that GPU has this one's architecture (what was tuned for the regime
    carries over within an architecture); else the nearest regime in the task's order
    (ties: the smaller regime) on the most similar GPU."""
    order = dispatch_gpu_order(table, here)
    if not order:
        raise LookupError("dispatch table has no GPU entries")
    names = [c[0] for c in table["rule"]["classes"]]
    gpus = table["gpus"]
    for gpu in order:
        if regime in gpus[gpu]["regimes"]:
            if gpu == here.get("gpu_name"):
                return gpu, regime, gpus[gpu]["regimes"][regime], None
            if gpus[gpu].get("facts", {}).get("arch") == here.get("arch"):
                return gpu, regime, gpus[gpu]["regimes"][regime], \
                    f"no entry for {here.get('gpu_name')}: {regime} as tuned on {gpu} " \
                    "(same architecture)"
            break
    for gpu in order:
        have = [n for n in names if n in gpus[gpu]["regimes"]]
        if not have:
            continue
        want = names.index(regime)
        near = min(have, key=lambda n: (abs(names.index(n) - want), names.index(n)))
        why = []
        if gpu != here.get("gpu_name"):
            why.append(f"no entry for {here.get('gpu_name')}: nearest GPU {gpu}")
        if near != regime:
            why.append(f"regime {regime} not measured: nearest regime {near}")
        return gpu, near, gpus[gpu]["regimes"][near], "; ".join(why) or None
    raise LookupError("dispatch table: no GPU has any regime")


def dispatch_distance(entry: dict, value: int) -> float:
    """How far a key value lies outside the measured span of the entry it runs (a learned
    table's entries carry one): 1.0 inside it, else the ratio to its nearer end."""
    span = entry.get("span")
    if not span:
        return 1.0
    low, high = span
    if value < low:
        return low / max(value, 1)
    return value / high if value > high else 1.0


DISPATCH_FAR = 2.0  # a call this many times outside its bucket's measured span is warned


# a header constant line: NAME = literal  # comment
HEADER_LINE = re.compile(r"^([A-Z][A-Z0-9_]*)\s*=\s*(.+?)\s*(#.*)?$")


def header_literal(text: str):
    """The value of a header line's literal (bool, int, float or a quoted string);
    ValueError for anything else."""
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    raise ValueError(text)


def _same_literal(text: str, value) -> bool:
    try:
        current = header_literal(text)
    except ValueError:
        return False
    return type(current) is type(value) and current == value


def dispatch_render(body: str, config: typing.Mapping) -> str:
    """The kernel body with its header constants set to ``config``, trailing comments
    kept and unchanged lines byte for byte (so a configuration renders exactly as the
    task rendered it when it was evaluated). KeyError: a constant the body does not
    have, so a table from another kernel cannot half-apply. The one renderer: the task
    (kernels.config) renders through it too."""
    lines = body.splitlines(keepends=True)
    left = dict(config)
    for n, line in enumerate(lines):
        match = HEADER_LINE.match(line.rstrip("\n"))
        if match and match.group(1) in left:
            value = left.pop(match.group(1))
            if _same_literal(match.group(2), value):
                continue
            comment = f"  {match.group(3)}" if match.group(3) else ""
            literal = f'"{value}"' if isinstance(value, str) else repr(value)
            lines[n] = f"{match.group(1)} = {literal}{comment}\n"
    if left:
        raise KeyError(f"the kernel has no header constant {sorted(left)}")
    return "".join(lines)


def dispatch_load(source: str, name: str) -> object:
    """Import kernel source as a module from a real file (Triton's @jit reads the file)."""
    folder = tempfile.mkdtemp(prefix="kernelkb_dispatch_")
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as handle:
        handle.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file: a source loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the launch cache ---------------------------------------------------------------------
def _arg_key(value: typing.Any) -> object:
    """What Triton specializes an argument on, cheaply: a tensor's dtype, device and 16-byte
    alignment, an int's value (sizes and strides: per shape), a float's type."""
    if hasattr(value, "data_ptr"):
        return (value.dtype, value.get_device(), value.data_ptr() % 16 == 0)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return float
    return type(value)


def dispatch_fast_launch(fn: object, limit: int = 256) -> bool:
    """Give a Triton JITFunction a launch cache: per (grid, argument key, keyword
    values) the compiled kernel and the keyword tail, so a repeat call goes straight to
    the compiled launcher. The first call of a key and anything unusual (a callable
    grid, launch hooks set by a profiler, warm-up, more than ``limit`` keys) take Triton's
    own path; an error on the fast path turns it off for good and retries the plain one.
    Returns whether it was installed."""
    try:
        from triton.runtime import driver
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    if not isinstance(fn, JITFunction) or os.environ.get("TRITON_INTERPRET") == "1" or \
            os.environ.get("KERNELKB_FAST_LAUNCH") == "0" or getattr(fn, "_kkb_fast", False):
        return False
    plain = fn.run
    params = list(inspect.signature(fn.fn).parameters.values())
    names = [p.name for p in params]
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
    cache: dict = {}
    state = {"on": True}
    active = driver.active
    hooked = plan_hook_test()

    def run(*args, grid, warmup, **kwargs):
        if warmup or not state["on"] or callable(grid) or hooked():
            return plain(*args, grid=grid, warmup=warmup, **kwargs)
        try:
            key = (tuple(grid), tuple(map(_arg_key, args)), tuple(kwargs.items()))
            hit = cache.get(key)
        except TypeError:  # an unhashable argument: Triton's path
            return plain(*args, grid=grid, warmup=warmup, **kwargs)
        if hit is None:
            kernel = plain(*args, grid=grid, warmup=False, **kwargs)
            if hasattr(kernel, "result"):
                kernel = kernel.result()
            if kernel is None or getattr(kernel, "function", None) is None:
                return kernel  # not launched (or not loaded): nothing to reuse
            if len(cache) >= limit:
                state["on"] = False  # arguments that vary per call: caching does not pay
                return kernel
            try:
                tail = tuple(kwargs[n] if n in kwargs else defaults[n]
                             for n in names[len(args):])
            except KeyError:  # a parameter this code cannot place: never cached
                return kernel
            g0, g1, g2 = (tuple(grid) + (1, 1))[:3]
            cache[key] = (kernel, kernel.run, kernel.function, kernel.packed_metadata, tail,
                          g0, g1, g2)
            return kernel
        kernel, launcher, function, packed, tail, g0, g1, g2 = hit
        try:
            stream = active.get_current_stream(active.get_current_device())
            launcher(g0, g1, g2, stream, function, packed, None, None, None, *args, *tail)
        except Exception as err:  # noqa: BLE001 - a launcher this code does not know
            state["on"] = False
            warnings.warn(f"kernelkb fast launch off ({type(err).__name__}: {err}); "
                          "using Triton's launch path", stacklevel=2)
            return plain(*args, grid=grid, warmup=False, **kwargs)
        return kernel

    fn.run = run
    fn._kkb_fast = True
    return True


def dispatch_fast_launch_module(namespace: dict) -> int:
    """dispatch_fast_launch for every Triton kernel among a module's globals; the count."""
    return sum(dispatch_fast_launch(v) for v in list(namespace.values()))


# -- the dispatcher -----------------------------------------------------------------------
def dispatch_key_reader(inputs: list):
    """The per-call key: the sizes the rule reads, as one int (one dim) or a tuple, by a
    closure made once per op (``shape[d]`` measured faster than ``size(d)``)."""
    at = [(int(i), int(d)) for i, d in inputs]
    if not at:
        return lambda args: ()
    if len(at) == 1:
        (i, d), = at
        return lambda args: args[i].shape[d]
    if len(at) == 2:
        (i0, d0), (i1, d1) = at
        if i0 == i1:
            return lambda args: (args[i0].shape[d0], args[i0].shape[d1])
        return lambda args: (args[i0].shape[d0], args[i1].shape[d1])
    return lambda args: tuple(args[i].shape[d] for i, d in at)


class Dispatcher:
    """Calls the configuration the table holds for the inputs' regime on this GPU.

    ``load(entry) -> run``: the kernel's run() with the entry's configuration (and its
    own source where the entry names one the module carries); the exported module passes
    its own run for its own header and loads others once. ``here``: the
    device as ``dispatch_gpu_here`` describes it (read on the first call when None)."""

    def __init__(self, table: dict, load, here: dict | None = None) -> None:
        self.table = dispatch_check(table)
        self.load = load
        self.here = here
        self.key = dispatch_key_reader(table["rule"]["inputs"])
        self.by_key: dict = {}
        self.by_config: dict = {}
        self.warned: set = set()
        self.choices: dict = {}  # key -> (gpu, regime, why): what each shape runs
        self.distance: dict = {}  # key -> its distance from the measured span (1.0: inside)
        self.call = self._caller()

    def _caller(self):
        """The per-call path as a closure (an instance's __call__ costs a method lookup
        and a bound call more): read the key, look it up, run."""
        key, by_key, resolve = self.key, self.by_key, self.resolve

        def call(*args):
            k = key(args)
            run = by_key.get(k)
            if run is None:
                run = resolve(k)
            return run(*args)

        return call

    def __call__(self, *args):
        return self.call(*args)

    def pick(self, args):
        """The run() of the configuration ``args`` dispatch to (the launch plan's source)."""
        k = self.key(args)
        return self.by_key.get(k) or self.resolve(k)

    def resolve(self, key):
        if self.here is None:
            self.here = dispatch_gpu_here()
        parts = key if isinstance(key, tuple) else (key,)
        regime = dispatch_regime(self.table["rule"], parts)
        gpu, used, entry, why = dispatch_select(self.table, self.here, regime)
        value = math.prod(int(p) for p in parts)
        far = self.distance[key] = dispatch_distance(entry, value)
        if far >= DISPATCH_FAR:
            span = entry["span"]
            note = f"{value} is {far:.1f}x outside the measured {span[0]}..{span[1]} of {used}"
            why = f"{why}; {note}" if why else note
            regime = f"{regime} (outside)"
        if why and (gpu, regime) not in self.warned:
            self.warned.add((gpu, regime))
            warnings.warn(f"kernelkb dispatch ({self.table['task']}): {why}", stacklevel=3)
        config_key = (entry.get("source"), tuple(sorted(entry["config"].items())))
        run = self.by_config.get(config_key)
        if run is None:
            run = self.by_config[config_key] = self.load(entry)
        if len(self.by_key) >= DISPATCH_CACHE_MAX:
            self.by_key.clear()
        self.by_key[key] = run
        self.choices[key] = (gpu, used, why)
        return run
