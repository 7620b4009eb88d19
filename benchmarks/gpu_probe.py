"""One-shot probe of the GPU host: versions, peaks, and whether the pieces we rely on work
(do_bench, compiled-kernel metadata, torch.compile, Liger-Kernel). Prints JSON."""

import json
import time

import torch
import triton
from triton.testing import do_bench

from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import get_task

out = {"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda}
props = torch.cuda.get_device_properties(0)
out["gpu"] = props.name
out["sm_count"] = props.multi_processor_count
out["cc"] = f"{props.major}.{props.minor}"
for attr in ("shared_memory_per_multiprocessor", "shared_memory_per_block_optin", "L2_cache_size",
             "total_memory", "memory_clock_rate", "memory_bus_width"):
    out[attr] = getattr(props, attr, None)
n = 1 << 30
a = torch.empty(n, dtype=torch.uint8, device="cuda")
b = torch.empty_like(a)
ms = do_bench(lambda: b.copy_(a), warmup=25, rep=200, return_mode="median")
out["copy_GBps_rw"] = 2 * n / ms / 1e6
x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
ms = do_bench(lambda: x @ x, warmup=25, rep=200, return_mode="median")
out["bf16_tflops"] = 2 * 8192**3 / ms / 1e9
task = get_task("softmax")
mod = load_candidate(task.render({}))
xx = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
mod.run(xx)
out["softmax_naive_ms"] = do_bench(lambda: mod.run(xx), return_mode="median")
out["softmax_torch_ms"] = do_bench(lambda: torch.softmax(xx, -1), return_mode="median")
kern = mod.softmax_kernel
info = {}
for name in ("device_caches", "cache"):
    info[name] = str(type(getattr(kern, name, None)))
try:
    caches = kern.device_caches[0][0] if hasattr(kern, "device_caches") else kern.cache[0]
    ck = next(iter(caches.values()))
    info["n_regs"] = ck.n_regs
    info["n_spills"] = ck.n_spills
    info["shared"] = ck.metadata.shared
except Exception as err:  # probe: report, do not fail
    info["error"] = repr(err)
out["compiled"] = info
t0 = time.time()
try:
    f = torch.compile(lambda t: torch.softmax(t.float(), -1).half())
    f(xx)
    out["compile_ms"] = do_bench(lambda: f(xx), return_mode="median")
except Exception as err:
    out["compile_error"] = repr(err)[:300]
out["compile_s"] = time.time() - t0
try:
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction  # noqa: F401
    out["liger"] = "ok"
except Exception as err:
    out["liger"] = repr(err)[:300]
print(json.dumps(out, indent=1))
