"""The hardware fingerprint of this host, and the ceilings "share of peak" is taken against.

Datasheet figures are a fallback; ``measure_peaks`` measures the two ceilings that
matter for the roofline on the GPU itself (device-to-device copy bandwidth, a large
bf16 matmul), and callers pass them to ``evaluate(peaks=...)``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import triton

log = logging.getLogger(__name__)

# name fragment -> (HBM GB/s, dense bf16 TFLOP/s), vendor datasheets; the longest
# fragment a name holds is its row (datasheet()).
DATASHEET: tuple[tuple[str, float, float], ...] = (
    ("H200", 4800.0, 989.0),
    ("GH200", 4000.0, 989.0),
    ("H100 PCIe", 2000.0, 756.0),
    ("H100 NVL", 3900.0, 835.0),
    ("H100", 3350.0, 989.0),
    ("H800", 3350.0, 989.0),
    ("H20", 4000.0, 148.0),
    ("B200", 8000.0, 2250.0),
    ("A100-SXM4-80GB", 2039.0, 312.0),
    ("A100 80GB PCIe", 1935.0, 312.0),
    ("A100", 1555.0, 312.0),
    ("A10G", 600.0, 70.0),
    ("L40S", 864.0, 362.0),
    ("L4", 300.0, 121.0),
    ("RTX 4090", 1008.0, 165.0),
    ("V100", 900.0, 125.0),
    ("T4", 320.0, 65.0),
)


def datasheet(gpu_name: str) -> tuple[float | None, float | None]:
    """The longest fragment the name holds wins ("GH200" over "H200", "L40S" over "L4"):
    the first match in table order read a GH200 as an H200."""
    found = [row for row in DATASHEET if row[0].lower() in gpu_name.lower()]
    if not found:
        return None, None
    _, gbps, tflops = max(found, key=lambda row: len(row[0]))
    return gbps, tflops


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
