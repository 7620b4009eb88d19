"""The hardware fingerprint of this host, and the ceilings "share of peak" is taken against.

Datasheet figures (``datasheet``, from the GPU table in kernels/shared/gpus.py) are a
fallback; ``measure_peaks`` measures the two ceilings that matter for the roofline on the
GPU itself (device-to-device copy bandwidth, a large bf16 matmul), and callers pass them
to ``evaluate(peaks=...)``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import triton

from kernelkb.kernels.shared.gpus import datasheet

log = logging.getLogger(__name__)


def detect_environment(peaks: dict[str, float] | None = None) -> dict[str, Any]:
    """GPU name, arch, SM count, shared memory per SM, peaks and versions.

    Validates as ``kb.record.Environment``. Measured ``peaks`` win over the datasheet.
    """
    env: dict[str, Any] = {
        "triton_version": triton.__version__,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
    }
    if not torch.cuda.is_available():
        env.update(gpu_name="cpu-interpreter", arch="cpu", sm_count=None,
                   smem_per_sm_kib=None, mem_bandwidth_gbps=None, peak_tflops=None)
        return env
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    gbps, tflops = datasheet(props.name)
    smem = getattr(props, "shared_memory_per_multiprocessor", None)
    env.update(
        gpu_name=props.name,
        arch=f"sm_{props.major}{props.minor}",
        sm_count=props.multi_processor_count,
        smem_per_sm_kib=smem // 1024 if smem else None,
        mem_bandwidth_gbps=(peaks or {}).get("mem_bandwidth_gbps") or gbps,
        peak_tflops=(peaks or {}).get("peak_tflops") or tflops,
    )
    return env


def measure_peaks(copy_mib: int = 1024, matmul_n: int = 8192) -> dict[str, float]:
    """Measured ceilings on this GPU: copy bandwidth (read + write bytes) and bf16 matmul.

    Raises RuntimeError without CUDA: there is no meaningful peak for the interpreter.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("measure_peaks needs a CUDA GPU")
    from triton.testing import do_bench

    n = copy_mib * 1024 * 1024 // 4
    src = torch.empty(n, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    copy_ms = do_bench(lambda: dst.copy_(src), warmup=50, rep=300, return_mode="median")
    gbps = 2 * src.numel() * 4 / (copy_ms * 1e-3) / 1e9
    a = torch.randn(matmul_n, matmul_n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(matmul_n, matmul_n, device="cuda", dtype=torch.bfloat16)
    mm_ms = do_bench(lambda: a @ b, warmup=50, rep=300, return_mode="median")
    tflops = 2 * matmul_n**3 / (mm_ms * 1e-3) / 1e12
    log.info("measured peaks: %.0f GB/s copy, %.0f TFLOP/s bf16 matmul", gbps, tflops)
    return {"mem_bandwidth_gbps": gbps, "peak_tflops": tflops}
