"""Make the tuning files Triton and PyTorch users already have, on a real GPU, so the
importers are tested against what the tools write rather than against a guess:

- Triton's autotuner disk cache (``@triton.autotune(..., cache_results=True)``): one
  ``<kernel>.autotune.json`` per key under the Triton cache directory;
- Inductor's max-autotune choice timings for ``mm`` (the "AUTOTUNE mm(...)" tables it
  prints), and its AutoHeuristic collection log (``TORCHINDUCTOR_AUTOHEURISTIC_COLLECT``).

Everything lands under ``--out`` (GPU name and versions in ``about.json``).
    python benchmarks/tuner_files.py --out /tmp/tuner_files
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SHAPES = ((16, 4096, 4096), (128, 4096, 4096), (1024, 4096, 4096), (4096, 4096, 4096))
# shapes off the 8-element grid: Inductor's pad_mm decides there, and AutoHeuristic logs it
UNALIGNED = ((1000, 4095, 4097), (2047, 1023, 4093))


def triton_cache(out: Path) -> None:
    """An autotuned matmul with the matmul task's knob names, run at the task's shapes."""
    cache = Path("/tmp/kkb_triton_cache")
    shutil.rmtree(cache, ignore_errors=True)
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    import torch
    import triton
    import triton.language as tl

    configs = [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                      num_warps=w, num_stages=s)
        for bm, bn, bk, w, s in ((64, 64, 64, 4, 4), (64, 64, 64, 4, 6), (128, 128, 64, 8, 4),
                                 (128, 256, 64, 8, 3), (64, 128, 64, 4, 4), (16, 64, 128, 4, 4))
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K"], cache_results=True)
    @triton.jit
    def matmul_kernel(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        pid = tl.program_id(0)
        grid_m, grid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        group = GROUP_M * grid_n
        first_m = (pid // group) * GROUP_M
        rows = min(grid_m - first_m, GROUP_M)
        pm = first_m + (pid % group) % rows
        pn = (pid % group) // rows
        rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ka = k0 + rk
            x = tl.load(a + rm[:, None] * K + ka[None, :],
                        mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)
            y = tl.load(b + ka[:, None] * N + rn[None, :],
                        mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(c.dtype.element_ty),
                 mask=(rm[:, None] < M) & (rn[None, :] < N))

    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16) / k**0.5
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.empty(m, n, device="cuda", dtype=torch.float16)
        def grid(meta, m=m, n=n):
            return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
        matmul_kernel[grid](a, b, c, m, n, k)
        torch.cuda.synchronize()
        err = (c.float() - a.float() @ b.float()).abs().max().item()
        print(f"triton autotune M={m} N={n} K={k}: best {matmul_kernel.best_config} err {err:.2e}")
    for f in sorted(cache.rglob("*.autotune.json")):
        dest = out / "triton_cache" / f"{f.parent.name[:12]}_{f.name}"  # flat: one level
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, dest)
        print("kept", dest.relative_to(out))


INDUCTOR_CHILD = r"""
import torch
shapes = %r
f = torch.compile(lambda a, b: a @ b, mode="max-autotune-no-cudagraphs", dynamic=False)
for m, n, k in shapes:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    f(a, b); torch.cuda.synchronize()
    print("compiled", m, n, k, flush=True)
"""


def inductor_logs(out: Path) -> None:
    """torch.compile max-autotune over mm in a child with a fresh Inductor cache, so every
    shape autotunes; stderr keeps the choice tables, the cache dir the collection log."""
    cache = Path("/tmp/kkb_inductor_cache")
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache),
               TORCHINDUCTOR_AUTOHEURISTIC_COLLECT="mm,pad_mm",
               TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_AUTOTUNE_IN_SUBPROC="0")
    with open(out / "inductor_autotune.log", "w") as log:
        rc = subprocess.run([sys.executable, "-c", INDUCTOR_CHILD % (SHAPES + UNALIGNED,)], env=env,
                            stdout=log, stderr=subprocess.STDOUT, timeout=900).returncode
    print(f"inductor max-autotune rc={rc}")
    for f in sorted(cache.rglob("*")):
        if f.is_file() and ("heuristic" in str(f) or f.suffix in (".txt", ".json")):
            dest = out / "inductor_files" / f"{f.parent.name[:12]}_{f.name}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, dest)
            print("kept", dest.relative_to(out))


def pack(out: Path) -> None:
    """Everything made, in one archive beside the folders (hundreds of small files)."""
    import tarfile
    with tarfile.open(out.parent / f"{out.name}.tgz", "w:gz") as tar:
        tar.add(out, arcname=out.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", choices=("triton", "inductor"), default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch
    import triton
    about = {"gpu": torch.cuda.get_device_name(), "triton": triton.__version__,
             "torch": torch.__version__, "cuda": torch.version.cuda,
             "capability": ".".join(map(str, torch.cuda.get_device_capability()))}
    (args.out / "about.json").write_text(json.dumps(about, indent=1))
    if args.only != "inductor":
        triton_cache(args.out)
    if args.only != "triton":
        inductor_logs(args.out)
    pack(args.out)


if __name__ == "__main__":
    main()
