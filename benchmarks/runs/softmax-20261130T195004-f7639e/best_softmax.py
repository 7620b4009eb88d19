"""Best softmax kernel found by kernelkb optimize. Run softmax-20261130T195004-f7639e, NVIDIA H200.

Call dispatch_run(...), or torch.ops.kernelkb.softmax(...) from PyTorch.

The configuration is picked per call by the input shape's regime (short_rows, medium_rows, long_rows) and this GPU from best_softmax.dispatch.json beside this file (or $KERNELKB_DISPATCH_TABLE; else the copy embedded below).
"""

# -- kernel (begin) --
import functools

import torch
import triton
import triton.language as tl

BLOCK_SIZE = 0  # columns per tile; 0 = the whole row (next power of two) in one tile
NUM_WARPS = 2
NUM_STAGES = 1
ROWS_PER_PROGRAM = 1  # rows each program handles, to amortise launch for short rows
ONLINE = False  # chunked rows: one online pass for max and sum instead of two passes
LONG_ROW_BLOCK = 0  # rows of LONG_ROW_COLS+ columns: 0 = as BLOCK_SIZE says; N = long-row path
# not a search knob: on the H200 a persistent long-row grid lost (1 program an SM) or tied
# (2); kept for cards whose L2 holds more rows in flight (benchmarks/variants.py --wide 4)
LONG_ROW_PERSISTENT = 0  # long-row path: 0 = a program a row; N = N programs an SM loop over rows
L2_HINTS = False  # long-row path: keep pass 1's reads in L2 for pass 2, stream the output past it

LONG_ROW_COLS = 32768  # where the long-row path starts (not a search knob)


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                   BLOCK: tl.constexpr, SINGLE_TILE: tl.constexpr,
                   ONLINE_PASS: tl.constexpr, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for r in range(ROWS):
        row = pid * ROWS + r
        if row < n_rows:
            x_row = x_ptr + row.to(tl.int64) * stride_x
            o_row = out_ptr + row.to(tl.int64) * stride_o
            if SINGLE_TILE:
                mask = cols < n_cols
                x = tl.load(x_row + cols, mask=mask, other=-float("inf")).to(tl.float32)
                e = tl.exp(x - tl.max(x, 0))
                y = e / tl.sum(e, 0)
                tl.store(o_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
            else:
                if ONLINE_PASS:
                    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
                    s_vec = tl.zeros([BLOCK], tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        m_new = tl.maximum(m_vec, x.to(tl.float32))
                        alive = m_new > -float("inf")
                        scale = tl.where(alive, tl.exp(m_vec - m_new), 0.0)
                        s_vec = s_vec * scale + tl.where(alive, tl.exp(x - m_new), 0.0)
                        m_vec = m_new
                    m = tl.max(m_vec, 0)
                    s = tl.sum(tl.where(m_vec > -float("inf"), s_vec * tl.exp(m_vec - m), 0.0), 0)
                else:
                    m_vec = tl.full([BLOCK], -float("inf"), tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        m_vec = tl.maximum(m_vec, x.to(tl.float32))
                    m = tl.max(m_vec, 0)
                    s_vec = tl.zeros([BLOCK], tl.float32)
                    for start in range(0, n_cols, BLOCK):
                        mask = start + cols < n_cols
                        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                        s_vec += tl.exp(x.to(tl.float32) - m)
                    s = tl.sum(s_vec, 0)
                for start in range(0, n_cols, BLOCK):
                    mask = start + cols < n_cols
                    x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
                    y = tl.exp(x.to(tl.float32) - m) / s
                    tl.store(o_row + start + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_long_row_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o,
                            BLOCK: tl.constexpr, HINTS: tl.constexpr):
    # rows in BLOCK-column chunks, rows pid, pid + programs, ...: pass 1 keeps a running
    # row max and a sum rescaled when the max grows (one exp2 per element); pass 2 walks
    # the chunks backwards, so the ones pass 1 read last are re-read while still in L2
    LOG2E: tl.constexpr = 1.4426950408889634
    cols = tl.arange(0, BLOCK)
    first = tl.program_id(0).to(tl.int64)  # an int64 loop: row * stride passes 2**31
    for row in range(first, n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * stride_x
        o_row = out_ptr + row * stride_o
        m = -float("inf")
        s = 0.0
        for start in range(0, n_cols, BLOCK):
            mask = start + cols < n_cols
            if HINTS:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"),
                            eviction_policy="evict_last")
            else:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
            x = x.to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, 0))
            s = s * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((x - m_new) * LOG2E), 0)
            m = m_new
        inv = 1.0 / s
        n_chunks = tl.cdiv(n_cols, BLOCK)
        for i in range(0, n_chunks):
            start = (n_chunks - 1 - i) * BLOCK
            mask = start + cols < n_cols
            if HINTS:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"),
                            eviction_policy="evict_first")
            else:
                x = tl.load(x_row + start + cols, mask=mask, other=-float("inf"))
            y = (tl.exp2((x.to(tl.float32) - m) * LOG2E) * inv).to(out_ptr.dtype.element_ty)
            if HINTS:
                tl.store(o_row + start + cols, y, mask=mask, cache_modifier=".cs")
            else:
                tl.store(o_row + start + cols, y, mask=mask)


@functools.cache
def _sm_count(device):
    """SMs of the GPU, for the persistent long-row grid (1 in the CPU interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def run(x):
    n_rows, n_cols = x.shape
    x = x.contiguous()
    out = torch.empty_like(x)
    if LONG_ROW_BLOCK and n_cols >= LONG_ROW_COLS:
        programs = n_rows
        if LONG_ROW_PERSISTENT:
            programs = min(n_rows, LONG_ROW_PERSISTENT * _sm_count(x.device))
        softmax_long_row_kernel[(programs,)](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                                             BLOCK=LONG_ROW_BLOCK, HINTS=L2_HINTS,
                                             num_warps=NUM_WARPS)
        return out
    whole_row = triton.next_power_of_2(n_cols)
    block = whole_row if BLOCK_SIZE == 0 else min(BLOCK_SIZE, whole_row)
    grid = (triton.cdiv(n_rows, ROWS_PER_PROGRAM),)
    softmax_kernel[grid](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                         BLOCK=block, SINGLE_TILE=block >= n_cols, ONLINE_PASS=ONLINE,
                         ROWS=ROWS_PER_PROGRAM, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    return out
# -- kernel (end) --


# -- dispatch runtime (kernels/dispatch_runtime.py of KernelKB, generated) ------
import importlib.util
import inspect
import math
import os
import re
import tempfile
import warnings

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


def dispatch_render(body: str, config: dict) -> str:
    """The kernel body with its header constants set to ``config``, trailing comments
    kept and unchanged lines byte for byte (so a configuration renders exactly as the
    task rendered it when it was evaluated). KeyError: a constant the body does not
    have, so a table from another kernel cannot half-apply. The one renderer: the task
    (kernels.base) renders through it too."""
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
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the launch cache ---------------------------------------------------------------------
def _arg_key(value: object) -> object:
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
        from triton import knobs
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

    def run(*args, grid, warmup, **kwargs):
        if warmup or not state["on"] or callable(grid) or \
                knobs.runtime.launch_enter_hook is not None:
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

    def resolve(self, key):
        if self.here is None:
            self.here = dispatch_gpu_here()
        regime = dispatch_regime(self.table["rule"], key if isinstance(key, tuple) else (key,))
        gpu, used, entry, why = dispatch_select(self.table, self.here, regime)
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


# -- dispatch of this kernel (generated) -------------------------------------------
import json as _kkb_json

_KKB_TABLE = _kkb_json.loads("{\"format\": \"kernelkb.dispatch/1\", \"task\": \"softmax\", \"dtype\": \"float16\", \"rule\": {\"dims\": [\"cols\"], \"inputs\": [[0, 1]], \"classes\": [[\"short_rows\", 2048], [\"medium_rows\", 16384], [\"long_rows\", null]], \"reason\": \"row length decides whole-row tile vs chunked/online passes and how many warps a row needs\"}, \"gpus\": {\"NVIDIA H200\": {\"facts\": {\"arch\": \"sm_90\", \"sm_count\": 132, \"mem_bandwidth_gbps\": 4245.515283948667, \"smem_per_sm_kib\": 228, \"peak_tflops\": 689.636090645226, \"vendor\": null}, \"regimes\": {\"short_rows\": {\"config\": {\"BLOCK_SIZE\": 0, \"NUM_WARPS\": 2, \"NUM_STAGES\": 1, \"ROWS_PER_PROGRAM\": 1, \"ONLINE\": false, \"LONG_ROW_BLOCK\": 0, \"L2_HINTS\": false}, \"timed\": true, \"time_ms\": 0.03651199862360954, \"start_ms\": 0.03964800015091896, \"speedup_vs_start\": 1.0859, \"shapes\": [\"rows=32768,cols=1024\"], \"run_id\": \"softmax-20261130T195004-f7639e\", \"measured_at\": \"2026-11-30T19:56:00+00:00\", \"triton_version\": \"3.6.0\", \"torch_version\": \"2.11.0+cu130\"}, \"medium_rows\": {\"config\": {\"BLOCK_SIZE\": 0, \"NUM_WARPS\": 4, \"NUM_STAGES\": 1, \"ROWS_PER_PROGRAM\": 1, \"ONLINE\": false, \"LONG_ROW_BLOCK\": 0, \"L2_HINTS\": false}, \"timed\": true, \"time_ms\": 0.017135083617385114, \"start_ms\": 0.017135083617385114, \"speedup_vs_start\": 1.0, \"shapes\": [\"rows=128,cols=4096\", \"rows=1024,cols=4096\", \"rows=4096,cols=4096\", \"rows=8192,cols=8192\"], \"run_id\": \"softmax-20261130T195004-f7639e\", \"measured_at\": \"2026-11-30T19:56:00+00:00\", \"triton_version\": \"3.6.0\", \"torch_version\": \"2.11.0+cu130\"}, \"long_rows\": {\"config\": {\"BLOCK_SIZE\": 0, \"NUM_WARPS\": 16, \"NUM_STAGES\": 1, \"ROWS_PER_PROGRAM\": 1, \"ONLINE\": false, \"LONG_ROW_BLOCK\": 16384, \"L2_HINTS\": true}, \"timed\": true, \"time_ms\": 0.05865910447309836, \"start_ms\": 0.1564634427691583, \"speedup_vs_start\": 2.6673, \"shapes\": [\"rows=4096,cols=32768\", \"rows=1024,cols=128256\", \"rows=1,cols=32000\"], \"run_id\": \"softmax-20261130T195004-f7639e\", \"measured_at\": \"2026-11-30T19:56:00+00:00\", \"triton_version\": \"3.6.0\", \"torch_version\": \"2.11.0+cu130\"}}}}}")
_KKB_SOURCES = _kkb_json.loads("{}")


def _kkb_table():
    here = os.environ.get('KERNELKB_DISPATCH_TABLE') or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'best_softmax.dispatch.json')
    if os.path.exists(here):
        with open(here) as handle:
            return dispatch_check(_kkb_json.load(handle))
    return _KKB_TABLE


def _kkb_body():
    with open(__file__) as handle:
        text = handle.read()
    return text.split('# -- kernel (begin) --' + '\n', 1)[1].split('# -- kernel (end) --', 1)[0]


def _kkb_load(entry):
    config, source = entry['config'], entry.get('source')
    here = globals()
    if source is None and all(type(here.get(k)) is type(v) and here.get(k) == v
                              for k, v in config.items()):
        return run  # this module's own configuration
    text = _KKB_SOURCES[source] if source in _KKB_SOURCES else \
        dispatch_render(_kkb_body(), config)
    name = 'kkb_' + __name__.replace('.', '_') + '_' + str(len(_KKB_LOADED))
    module = dispatch_load(text, name)
    if _KKB_FAST:
        dispatch_fast_launch_module(vars(module))
    _KKB_LOADED.append(module)
    return module.run


_KKB_LOADED = []
# KERNELKB_FAST_LAUNCH=0 at import: Triton's own launch path for every configuration
_KKB_FAST = os.environ.get('KERNELKB_FAST_LAUNCH') != '0'
if _KKB_FAST:
    dispatch_fast_launch_module(globals())
dispatcher = Dispatcher(_kkb_table(), _kkb_load)


# run(...) with the configuration of the inputs' regime on this GPU
dispatch_run = dispatcher.call


# -- PyTorch op (generated) ---------------------------------------------------
import warnings as _kkb_warnings

_kkb_lib = torch.library.Library("kernelkb", "FRAGMENT")
if not hasattr(torch.ops.kernelkb, "softmax"):
    _kkb_lib.define('softmax(Tensor x) -> Tensor')

    @torch.library.register_fake("kernelkb::softmax", lib=_kkb_lib)
    def _softmax_fake(x):
        return torch.empty_like(x)
with _kkb_warnings.catch_warnings():
    _kkb_warnings.simplefilter('ignore')  # 'overriding a previously registered kernel'
    _kkb_lib.impl("softmax", dispatch_run, "CompositeExplicitAutograd")
softmax_op = torch.ops.kernelkb.softmax.default
