"""Best matmul kernel found by kernelkb optimize. Run matmul-20261202T001232-5e44ca, NVIDIA H200.

Call dispatch_run(...), or torch.ops.kernelkb.matmul(...) from PyTorch.

The configuration is picked per call by the input shape's regime (skinny, medium, large) and this GPU from best_matmul.dispatch.json beside this file (or $KERNELKB_DISPATCH_TABLE; else the copy embedded below).
"""

# -- kernel (begin) --
import torch
import triton
import triton.language as tl

BLOCK_M = 64  # output rows per program
BLOCK_N = 64  # output columns per program
BLOCK_K = 64  # reduction step
GROUP_M = 8  # tile rows walked together (1 = plain row-major program order)
NUM_WARPS = 4
NUM_STAGES = 6
EVEN_K = False  # drop the K masks when K % BLOCK_K == 0 (checked at launch)
SPLIT_K = 1  # programs sharing one tile's K range; >1 sums fp32 partials (a 2nd kernel)
PERSISTENT_TMA = False  # one program per SM over all tiles, A/B/C through TMA descriptors
FLATTEN = False  # TMA kernel: tile and K loops flattened into one (pipelined across tiles)
# not a search knob: within 0.3% either way on the H200's large shapes (variants --wide 5)
WARP_SPECIALIZE = False  # TMA kernel: producer warps load, consumer warps multiply (not FLATTEN)

# (device, tiles) -> int32 arrival counters of the TMA split-K fixup, zeroed again by the
# kernel after each use; shared by calls of one tile count, so two such calls must not run
# at once on different streams
_COUNTERS = {}


@triton.jit
def matmul_kernel(c_ptr, a_ptr, b_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cs, stride_cm, stride_cn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP: tl.constexpr, K_EVEN: tl.constexpr, SPLITS: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # grouped order: GROUP tile rows share each column of B tiles before moving on
    per_group = GROUP * tiles_n
    first_m = (pid // per_group) * GROUP
    group_rows = tl.minimum(tiles_m - first_m, GROUP)
    pid_m = first_m + (pid % per_group) % group_rows
    pid_n = (pid % per_group) // group_rows

    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    k_chunk = tl.cdiv(tl.cdiv(K, SPLITS), BK) * BK  # K range of one split, whole steps
    k_lo = split * k_chunk
    k_hi = tl.minimum(K, k_lo + k_chunk)
    a_ptrs = a_ptr + rows[:, None].to(tl.int64) * stride_am + (k_lo + ks)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_lo + ks)[:, None] * stride_bk + cols[None, :].to(tl.int64) * stride_bn
    row_ok = rows[:, None] < M
    col_ok = cols[None, :] < N
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k in range(k_lo, k_hi, BK):
        if K_EVEN:
            a = tl.load(a_ptrs, mask=row_ok, other=0.0)
            b = tl.load(b_ptrs, mask=col_ok, other=0.0)
        else:
            k_ok = k + ks < k_hi
            a = tl.load(a_ptrs, mask=row_ok & k_ok[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=k_ok[:, None] & col_ok, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c_ptrs = (c_ptr + split.to(tl.int64) * stride_cs + rows[:, None].to(tl.int64) * stride_cm
              + cols[None, :] * stride_cn)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=row_ok & col_ok)


@triton.jit
def splitk_sum_kernel(out_ptr, part_ptr, n, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    # out = the SPLITS fp32 partial tiles added in split order, cast to out's dtype
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    part_ptrs = part_ptr + offs
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for _ in tl.static_range(SPLITS):
        acc += tl.load(part_ptrs, mask=mask, other=0.0)
        part_ptrs += n
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def matmul_tma_kernel(c_ptr, a_ptr, b_ptr, part_ptr, count_ptr, M, N, K, plane, n_programs,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP: tl.constexpr, SPLITS: tl.constexpr, FLAT: tl.constexpr,
                      WS: tl.constexpr):
    # persistent: program p takes work items p, p + n_programs, ...; an item is one
    # output tile (grouped order) and one of SPLITS K ranges. A, B and C move through
    # TMA descriptors (bulk tensor copies, OOB rows/columns zero-filled or clipped).
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN])
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    tiles = tiles_m * tiles_n
    per_group = GROUP * tiles_n
    k_chunk = tl.cdiv(tl.cdiv(K, SPLITS), BK) * BK
    for item in tl.range(tl.program_id(0), tiles * SPLITS, n_programs, flatten=FLAT,
                         warp_specialize=WS):
        tile = item % tiles
        split = item // tiles
        first_m = (tile // per_group) * GROUP
        group_rows = tl.minimum(tiles_m - first_m, GROUP)
        pid_m = first_m + (tile % per_group) % group_rows
        pid_n = (tile % per_group) // group_rows
        k_lo = split * k_chunk
        k_hi = tl.minimum(K, k_lo + k_chunk)
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for k in range(k_lo, k_hi, BK):
            a = a_desc.load([pid_m * BM, k])
            b = b_desc.load([k, pid_n * BN])
            acc = tl.dot(a, b, acc)
        if SPLITS == 1:
            c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))
        else:
            # split-K fixup in the same kernel: each split stores its fp32 partial, then
            # counts in; the last to arrive adds the others' partials to its own, writes C
            # and resets the tile's counter for the next call
            rows = pid_m * BM + tl.arange(0, BM)
            cols = pid_n * BN + tl.arange(0, BN)
            ok = (rows[:, None] < M) & (cols[None, :] < N)
            offs = rows[:, None].to(tl.int64) * N + cols[None, :]
            tl.store(part_ptr + split.to(tl.int64) * plane + offs, acc, mask=ok)
            arrived = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
            if arrived == SPLITS - 1:
                for other in tl.static_range(SPLITS):
                    if other != split:
                        acc += tl.load(part_ptr + other * plane + offs, mask=ok, other=0.0,
                                       cache_modifier=".cg")
                c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))
                tl.atomic_xchg(count_ptr + tile, 0)


def _tma_scratch(size, alignment, stream):
    # global memory for the descriptors tl.make_tensor_descriptor builds on the device
    return torch.empty(size, device="cuda", dtype=torch.int8)


if torch.cuda.is_available():
    triton.set_allocator(_tma_scratch)


def _sm_count(device):
    """Programs of the persistent grid: one per SM (1 in the CPU interpreter)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def _tma_ok(a, b, K, N):
    """TMA needs 16-byte aligned bases and row strides (else the tiled kernel runs)."""
    size = a.element_size()
    return (a.is_contiguous() and b.is_contiguous() and (K * size) % 16 == 0
            and (N * size) % 16 == 0 and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0)


def _run_tma(a, b, M, N, K):
    splits = max(1, min(SPLIT_K, triton.cdiv(K, BLOCK_K)))
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    tiles = triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)
    if splits > 1:
        part = torch.empty((splits, M, N), device=a.device, dtype=torch.float32)
        key = (str(a.device), tiles)
        if key not in _COUNTERS:
            _COUNTERS[key] = torch.zeros(tiles, device=a.device, dtype=torch.int32)
        count = _COUNTERS[key]
    else:
        part = count = c  # never read
    programs = max(1, min(tiles * splits, _sm_count(a.device)))
    matmul_tma_kernel[(programs,)](c, a, b, part, count, M, N, K, M * N, programs,
                                   BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GROUP=GROUP_M,
                                   SPLITS=splits, FLAT=FLATTEN, WS=WARP_SPECIALIZE,
                                   num_warps=NUM_WARPS,
                                   num_stages=NUM_STAGES)
    return c


def run(a, b):
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs A [M, K] and B [K, N], got "
                         f"{tuple(a.shape)} @ {tuple(b.shape)}")
    M, K = a.shape
    N = b.shape[1]
    if PERSISTENT_TMA and _tma_ok(a, b, K, N):
        return _run_tma(a, b, M, N, K)
    splits = max(1, min(SPLIT_K, triton.cdiv(K, BLOCK_K)))
    k_even = EVEN_K and K % BLOCK_K == 0  # every split then covers whole K steps
    if splits == 1:
        c = torch.empty((1, M, N), device=a.device, dtype=a.dtype)
    else:
        c = torch.empty((splits, M, N), device=a.device, dtype=torch.float32)
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N), splits)
    matmul_kernel[grid](c, a, b, M, N, K,
                        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), c.stride(2),
                        BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K, GROUP=GROUP_M,
                        K_EVEN=k_even, SPLITS=splits,
                        num_warps=NUM_WARPS, num_stages=NUM_STAGES)
    if splits == 1:
        return c[0]
    out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    splitk_sum_kernel[(triton.cdiv(M * N, 1024),)](out, c, M * N, SPLITS=splits, BLOCK=1024)
    return out
# -- kernel (end) --


# -- dispatch runtime (kernels/dispatch_runtime.py of KernelKB, generated) ------
import importlib.util
import inspect
import math
import os
import re
import tempfile
import typing
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


def dispatch_render(body: str, config: typing.Mapping) -> str:
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

_KKB_TABLE = _kkb_json.loads("{\"format\": \"kernelkb.dispatch/1\", \"task\": \"matmul\", \"dtype\": \"float16\", \"rule\": {\"dims\": [\"M\"], \"inputs\": [[0, 0]], \"classes\": [[\"skinny\", 128], [\"medium\", 1024], [\"large\", null]], \"reason\": \"M buckets: skinny M (decode, small batches) under-fills the GPU with output tiles (small BLOCK_M, split-K); large M is compute-bound\"}, \"gpus\": {\"NVIDIA H200\": {\"facts\": {\"arch\": \"sm_90\", \"sm_count\": 132, \"mem_bandwidth_gbps\": 4220.550517209125, \"smem_per_sm_kib\": 228, \"peak_tflops\": 686.3711183033256, \"vendor\": null}, \"regimes\": {\"skinny\": {\"config\": {\"BLOCK_M\": 64, \"BLOCK_N\": 64, \"BLOCK_K\": 64, \"GROUP_M\": 8, \"NUM_WARPS\": 4, \"NUM_STAGES\": 6, \"EVEN_K\": false, \"SPLIT_K\": 1, \"PERSISTENT_TMA\": false, \"FLATTEN\": false}, \"timed\": true, \"time_ms\": 0.02193342687331948, \"start_ms\": 0.060464250446706315, \"speedup_vs_start\": 2.7567, \"shapes\": [\"M=128,N=4096,K=4096\", \"M=16,N=4096,K=4096\"], \"run_id\": \"matmul-20261202T001232-5e44ca\", \"measured_at\": \"2026-12-02T00:16:16+00:00\", \"triton_version\": \"3.6.0\", \"torch_version\": \"2.11.0+cu130\"}, \"medium\": {\"config\": {\"BLOCK_M\": 128, \"BLOCK_N\": 256, \"BLOCK_K\": 64, \"GROUP_M\": 8, \"NUM_WARPS\": 8, \"NUM_STAGES\": 4, \"EVEN_K\": false, \"SPLIT_K\": 1, \"PERSISTENT_TMA\": false, \"FLATTEN\": false}, \"timed\": true, \"time_ms\": 0.08379603994983503, \"start_ms\": 0.19256711406180613, \"speedup_vs_start\": 2.298, \"shapes\": [\"M=1024,N=4096,K=4096\", \"M=1024,N=11008,K=4096\"], \"run_id\": \"matmul-20261202T001232-5e44ca\", \"measured_at\": \"2026-12-02T00:16:16+00:00\", \"triton_version\": \"3.6.0\", \"torch_version\": \"2.11.0+cu130\"}, \"large\": {\"config\": {\"BLOCK_M\": 128, \"BLOCK_N\": 256, \"BLOCK_K\": 64, \"GROUP_M\": 8, \"NUM_WARPS\": 8, \"NUM_STAGES\": 3, \"EVEN_K\": false, \"SPLIT_K\": 1, \"PERSISTENT_TMA\": true, \"FLATTEN\": false}, \"timed\": true, \"time_ms\": 0.305965946892844, \"start_ms\": 0.6914254333337752, \"speedup_vs_start\": 2.2598, \"shapes\": [\"M=4096,N=4096,K=4096\", \"M=4096,N=14336,K=4096\", \"M=2048,N=4096,K=11008\"], \"run_id\": \"matmul-20261202T001232-5e44ca\", \"measured_at\": \"2026-12-02T00:16:16+00:00\", \"triton_version\": \"3.6.0\", \"torch_version\": \"2.11.0+cu130\"}}}}}")
_KKB_SOURCES = _kkb_json.loads("{}")


def _kkb_table():
    here = os.environ.get('KERNELKB_DISPATCH_TABLE') or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), 'best_matmul.dispatch.json')
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
if not hasattr(torch.ops.kernelkb, "matmul"):
    _kkb_lib.define('matmul(Tensor a, Tensor b) -> Tensor')
with _kkb_warnings.catch_warnings():
    _kkb_warnings.simplefilter('ignore')  # 'overriding a previously registered kernel'
    _kkb_lib.impl("matmul", dispatch_run, "CompositeExplicitAutograd")
matmul_op = torch.ops.kernelkb.matmul.default
