"""Features of (launch, GPU, shape) that mean the same for every task and every GPU.

A raw configuration (BLOCK_SIZE=1024, block_size_x=128) means something different in each
kernel; what it does to the hardware does not. The learned ranker (retrieval/ranker.py)
sees these derived features, the GPU's facts and, namespaced by op, the raw values.

Launch features (from a Launch, kernels/shared/launch.py: a task's for Triton tasks,
retrieval.launch's for Kernel Tuner data):

- ``threads``: threads per program. Latency hiding and scheduling granularity depend on it
  on any GPU.
- ``warps``: threads / the GPU's warp (wavefront) size, rounded up: the scheduler's unit, so
  256 threads are 8 warps on NVIDIA but 4 wavefronts on a wave64 AMD part.
- ``lane_use``: threads / (warps x warp size): a block of 48 threads wastes a third of each
  32-wide warp and more of a 64-wide one.
- ``log2_programs``: grid size. Too few programs leave SMs idle, on any GPU.
- ``work_per_thread``: output elements per thread (Kernel Tuner's tile_size_x x tile_size_y,
  Triton's tile / threads): instruction-level parallelism and register reuse.
- ``log2_elements_per_program``, ``log2_bytes_per_program``: work and data per program.
- ``tile_kib``: on-chip working set of one program; ``smem_share``: its shared-memory part
  / shared memory per SM; ``onchip_share``: the whole tile / (shared memory + register file
  per SM). Tiles that do not fit limit residency or spill on every GPU, at a size set by
  that GPU's facts.
- ``regs_per_thread``: estimated registers per thread (24 for addresses and indices + the
  register-resident tile in 4-byte words / threads); ``spill_risk``: that / 255, the
  per-thread limit. An estimate: compilers differ, the order of magnitude carries over.
- ``resident_programs``: programs one SM holds at once, the minimum over the thread,
  register, shared-memory and block-slot limits; ``occupancy``: resident warps / the SM's
  maximum warps. The classic CUDA occupancy calculation, which applies to AMD CUs too with
  their wavefront size and limits.
- ``programs_per_sm``: programs / SMs (after a persistent grid's cap); ``waves``: programs /
  (SMs x resident programs); ``wave_efficiency``: waves / ceil(waves), the share of the last
  wave that is not idle (tail effect).
- ``vector_width``, ``vector_bytes``: contiguous elements (bytes) per thread and access;
  16-byte accesses are the widest on both vendors. ``num_stages``, ``unroll``: pipelining
  depth and unrolling, which trade registers and shared memory for latency hiding.
- ``launches``: kernels a call launches; ``log2_reduction_splits``: programs sharing one
  output's reduction (split-K): the small-problem moves that buy programs at the price
  of a reduction, in one launch or two. What they cost depends on the GPU's launch and
  atomic latency, so they transfer as features, not as a task's knob names.

Shape features (from the shape's bytes moved and flops):

- ``intensity_vs_balance``: log2 of (flops / bytes) / (peak flops / bandwidth): above 0 the
  shape is compute bound on this GPU, below memory bound; ``memory_bound`` is that as 0/1.
  The same kernel can be either on two GPUs; the right configuration follows the class.
- ``log2_bytes_moved``: problem size; small problems are launch and occupancy bound.

GPU facts (``gpu.*``): bandwidth, SMs, shared memory per SM, registers per SM, maximum
threads per SM, warp size, L2, peak TFLOP/s and vendor (1 = NVIDIA). They let the model
learn how the effect of the features above depends on the card, and are what GPU
similarity (retrieval/hardware.py) is computed from.

A missing fact or cost gives NaN, never a guess: LightGBM routes missing values itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kernelkb.kernels.shared.launch import Launch

if TYPE_CHECKING:
    from kernelkb.kernels.shared.gpus import GpuFacts

NAN = float("nan")
MAX_REGS_PER_THREAD = 255
DEFAULT_MAX_PROGRAMS_PER_SM = 32  # resident blocks per SM (NVIDIA since Volta; AMD similar)
ADDRESS_REGISTERS = 24


# GPU facts: canonical key first, then spellings other tables use.
_FACT_NAMES = {
    "sm_count": ("sm_count", "cu_count", "compute_units"),
    "mem_bandwidth_gbps": ("mem_bandwidth_gbps", "bandwidth_gbps"),
    "smem_per_sm_kib": ("smem_per_sm_kib", "lds_per_cu_kib", "shared_memory_per_sm_kib"),
    "registers_per_sm": ("registers_per_sm", "regs_per_sm", "register_file_words"),
    "max_threads_per_sm": ("max_threads_per_sm", "threads_per_sm"),
    "warp_size": ("warp_size", "wavefront_size"),
    "l2_mib": ("l2_mib", "l2_cache_mib"),
    "peak_tflops": ("peak_tflops",),
}


def fact(gpu: Mapping[str, Any], name: str) -> float:
    """One numeric GPU fact by its canonical name, NaN when the table does not know it."""
    for key in _FACT_NAMES.get(name, (name,)):
        value = gpu.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value)
    if name == "l2_mib" and isinstance(gpu.get("l2_kib"), (int, float)):
        return float(gpu["l2_kib"]) / 1024
    return NAN


def vendor_is_nvidia(gpu: Mapping[str, Any]) -> float:
    vendor = str(gpu.get("vendor") or "").lower()
    arch = str(gpu.get("arch") or "").lower()
    if vendor:
        return 1.0 if "nvidia" in vendor else 0.0
    if arch.startswith("sm"):
        return 1.0
    return 0.0 if arch.startswith("gfx") else NAN


def gpu_features(gpu: Mapping[str, Any]) -> dict[str, float]:
    out = {f"gpu.{name}": fact(gpu, name) for name in _FACT_NAMES}
    out["gpu.vendor_nvidia"] = vendor_is_nvidia(gpu)
    return out


def _log2(x: float) -> float:
    """NaN for what has no finite logarithm (0, negatives, NaN, infinity): one record's
    extreme facts must not fail a feature table."""
    return math.log2(x) if x and x > 0 and math.isfinite(x) else NAN


def launch_features(launch: Any, gpu: Mapping[str, Any]) -> dict[str, float]:
    """The launch features of the module docstring for one GPU."""
    ln = Launch.of(launch)
    warp = fact(gpu, "warp_size")
    warp = 32.0 if math.isnan(warp) else warp  # the one default: every part here has 32 or 64
    sms = fact(gpu, "sm_count")
    smem_sm = fact(gpu, "smem_per_sm_kib") * 1024
    regs_sm = fact(gpu, "registers_per_sm")
    threads_sm = fact(gpu, "max_threads_per_sm")

    threads = ln.threads_per_program
    warps = math.ceil(threads / warp)
    register_words = max(0, ln.tile_bytes - ln.smem_bytes) / 4
    regs_thread = ADDRESS_REGISTERS + register_words / threads
    limits = [DEFAULT_MAX_PROGRAMS_PER_SM]
    if not math.isnan(threads_sm):
        limits.append(int(threads_sm // (warps * warp)))
    if not math.isnan(regs_sm):
        limits.append(int(regs_sm // (min(regs_thread, MAX_REGS_PER_THREAD) * warps * warp)))
    if ln.smem_bytes and not math.isnan(smem_sm):
        limits.append(int(smem_sm // ln.smem_bytes))
    resident = max(0, min(limits))
    programs = ln.programs
    if ln.programs_per_sm_cap and not math.isnan(sms):
        programs = min(programs, int(ln.programs_per_sm_cap * sms))
    occupancy = resident * warps * warp / threads_sm if not math.isnan(threads_sm) else NAN
    slots = sms * resident if not math.isnan(sms) else NAN
    waves = programs / slots if slots and not math.isnan(slots) else NAN
    onchip = smem_sm + (regs_sm * 4 if not math.isnan(regs_sm) else NAN)
    return {
        "threads": float(threads),
        "warps": float(warps),
        "lane_use": threads / (warps * warp),
        "log2_programs": _log2(programs),
        "work_per_thread": ln.elements_per_program / threads,
        "log2_elements_per_program": _log2(ln.elements_per_program),
        "log2_bytes_per_program": _log2(ln.elements_per_program * ln.bytes_per_element),
        "tile_kib": ln.tile_bytes / 1024,
        "smem_share": ln.smem_bytes / smem_sm if smem_sm else NAN,
        "onchip_share": ln.tile_bytes / onchip if onchip else NAN,
        "regs_per_thread": regs_thread,
        "spill_risk": regs_thread / MAX_REGS_PER_THREAD,
        "resident_programs": float(resident),
        "occupancy": occupancy,
        "programs_per_sm": programs / sms if not math.isnan(sms) else NAN,
        "waves": waves,
        "wave_efficiency": (waves / math.ceil(waves)) if waves and not math.isnan(waves)
        else NAN,
        "vector_width": float(ln.vector_width),
        "vector_bytes": float(ln.vector_width * ln.bytes_per_element),
        "num_stages": float(ln.num_stages),
        "unroll": float(ln.unroll),
        "launches": float(ln.launches),
        "log2_reduction_splits": _log2(ln.reduction_splits),
    }


def shape_features(gpu: Mapping[str, Any], bytes_moved: float | None,
                   flops: float | None) -> dict[str, float]:
    """Memory- vs compute-bound class of the shape on this GPU (NaN without both costs)."""
    bandwidth = fact(gpu, "mem_bandwidth_gbps")
    peak = fact(gpu, "peak_tflops")
    ratio = NAN
    if bytes_moved and flops and not math.isnan(bandwidth) and not math.isnan(peak):
        intensity = flops / bytes_moved
        balance = peak * 1e12 / (bandwidth * 1e9)
        ratio = _log2(intensity / balance) if math.isfinite(balance) and balance else NAN
    return {
        "intensity_vs_balance": ratio,
        "memory_bound": NAN if math.isnan(ratio) else float(ratio < 0),
        "log2_bytes_moved": _log2(bytes_moved or 0.0),
    }


def derive_features(launch: Any, gpu: Mapping[str, Any], bytes_moved: float | None = None,
                    flops: float | None = None) -> dict[str, float]:
    """Every transferable feature of one configuration on one shape and GPU."""
    return {**launch_features(launch, gpu), **shape_features(gpu, bytes_moved, flops),
            **gpu_features(gpu)}


def raw_features(op: str, config: Mapping[str, Any]) -> dict[str, float]:
    """The raw configuration, namespaced by op ("convolution.block_size_x"): numbers as
    they are, booleans 0/1, strings by a stable code (a tree only needs them apart)."""
    import zlib

    out: dict[str, float] = {}
    for name, value in config.items():
        if isinstance(value, bool):
            out[f"{op}.{name}"] = float(value)
        elif isinstance(value, (int, float)):
            out[f"{op}.{name}"] = float(value)
        elif isinstance(value, str):
            out[f"{op}.{name}"] = float(zlib.crc32(value.encode()) % 9973)
    return out


def default_facts(env: Any) -> dict[str, Any]:
    """GPU facts of a record's environment: the facts table (kernels.shared.gpus, when present)
    under the fingerprint the record itself carries."""
    facts: dict[str, Any] = {}
    lookup: Callable[[str | None], GpuFacts | None] | None
    try:
        from kernelkb.kernels.shared.gpus import lookup
    except ImportError:  # the facts table is optional: the fingerprint alone still works
        lookup = None
    if lookup is not None:
        found = lookup(env.gpu_name)
        if found is not None:
            facts.update(found if isinstance(found, Mapping) else found.facts())
        else:  # a part the table lacks: what its architecture fixes
            from kernelkb.kernels.shared.gpus import family_facts

            family = family_facts(env.gpu_name or "") or {}
            facts.update({k: v for k, v in family.items()
                          if k not in ("gpu_name", "facts_from", "unknown_facts")})
    for name in ("gpu_name", "arch", "sm_count", "mem_bandwidth_gbps", "smem_per_sm_kib",
                 "peak_tflops"):
        value = getattr(env, name, None)
        if value is not None:
            facts[name] = value
    return facts
