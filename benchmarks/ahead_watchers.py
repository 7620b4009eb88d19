"""What the worker's watchers cost a compile-ahead process, reproduced on a CPU.

Why: on an H100 a judged evaluation's "compile ahead" lap took a median 7.3 s with the
rules off and 13.2 s with them on (results/profile_worker_softmax_h100_tamper_sweep.txt).
Triton's compile makes many audited or watched calls (``open``, ``os.stat``,
``os.environ`` reads, ``os.listdir``, ptxas through ``subprocess``), and each runs the
hooks that surroundings.py and introspection.py add. No GPU is needed to see it: Triton's
CUDA backend and its bundled ptxas compile for an sm_90 target on any host.

How: each run is a fresh process with a fresh ``TRITON_CACHE_DIR`` that runs the ahead
process's own entry point (``ahead._main``) on an order for the shipped naive softmax
(kernels/templates/softmax.py, loaded as ``candidate.py`` as the worker loads it) over a
few shapes (each a new BLOCK / divisibility specialisation, the input conditions with
them), once with the watchers off and once armed exactly as ahead.py arms them. The
driver is a stand-in that names an sm_90 target (no CUDA here); Triton then compiles in
warm-up mode through ``JITFunction.run`` as on the GPU, ptxas included. Not the
interpreter: ``TRITON_INTERPRET`` is removed for the children.

    .venv/bin/python benchmarks/ahead_watchers.py [--runs 5] [--profile]

prints the seconds of each run, the median and range per mode, and with ``--profile`` a
cProfile of one run with the watchers on plus a tally of the watched reads by kind.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPES = ((1, 32000), (32768, 1024), (1823, 781), (5, 4097), (3, 1823))  # softmax (rows, cols)
DTYPE = "float16"
# the naive softmax (kernels/templates/softmax.py as shipped: a whole row in one tile),
# kept here so that edits to the template do not move the figures
CANDIDATE = """
import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, x_ptr, n_rows, n_cols, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row.to(tl.int64) * stride_x + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x.to(tl.float32) - tl.max(x.to(tl.float32), 0))
    y = e / tl.sum(e, 0)
    tl.store(out_ptr + row.to(tl.int64) * stride_o + cols, y.to(out_ptr.dtype.element_ty),
             mask=mask)


def run(x):
    lead = x.shape[:-1]
    x = x.reshape(-1, x.shape[-1]).contiguous()
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    softmax_kernel[(n_rows,)](out, x, n_rows, n_cols, x.stride(0), out.stride(0),
                              BLOCK=triton.next_power_of_2(n_cols), num_warps=4)
    return out.view(*lead, n_cols)
"""


def _child(order_path: str, profile: bool) -> None:
    """One ahead process: a stand-in driver, then ``ahead._main`` on the order."""
    perf_counter = time.perf_counter  # before surroundings.py wraps the clocks
    from triton.backends.compiler import GPUTarget
    from triton.runtime import driver

    class Sm90:  # what JITFunction.run asks of the driver in warm-up mode
        def get_current_device(self) -> int:
            return 0

        def get_current_stream(self, device: int | None = None) -> int:
            return 0

        def get_current_target(self) -> GPUTarget:
            return GPUTarget("cuda", 90, 32)

    driver.set_active(Sm90())
    from kernelkb.optimizer.sandbox import ahead, introspection, surroundings

    tally: dict[str, list[float]] = {}  # kind of watched read -> [calls, seconds]
    if profile:
        # audit hooks run unprofiled (their time lands on the audited builtin) unless
        # they say they may be traced
        for hook in (introspection.Introspection.audit, surroundings.Surroundings.audit):
            hook.__cantrace__ = True  # type: ignore[attr-defined]
        real = surroundings.Surroundings._refuse_if_candidate

        def counted(self, what, frame, callees=()):  # type: ignore[no-untyped-def]
            began = perf_counter()
            try:
                return real(self, what, frame, callees)
            finally:
                kind = what if what.startswith("os.environ") else what.split("(")[0]
                entry = tally.setdefault(kind, [0, 0.0])
                entry[0] += 1
                entry[1] += perf_counter() - began

        surroundings.Surroundings._refuse_if_candidate = counted  # type: ignore[method-assign]

    sys.argv = [sys.argv[0], order_path]
    began = perf_counter()
    if profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        rc = profiler.runcall(ahead._main)
        seconds = perf_counter() - began
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats("sandbox", 20)
        print("surroundings.py's check by kind of read (seconds under the profiler):",
              file=sys.stderr)
        for kind, (n, s) in sorted(tally.items(), key=lambda kv: -kv[1][1]):
            print(f"  {kind:<40} {n:7d} calls {s:7.3f} s", file=sys.stderr)
    else:
        rc = ahead._main()
        seconds = perf_counter() - began
    print(json.dumps({"rc": rc, "seconds": seconds}))


def _run(order_path: str, profile: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    with tempfile.TemporaryDirectory() as cache:
        env["TRITON_CACHE_DIR"] = cache
        env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        done = subprocess.run([sys.executable, __file__, "--child", order_path]
                              + (["--profile"] if profile else []), env=env, text=True,
                              capture_output=True, check=False)
        if profile:
            print(done.stderr)
        if done.returncode != 0:
            raise SystemExit(f"child failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["kernels"] = sum(1 for _ in Path(cache).glob("*/*.cubin"))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.profile)
        return
    orders = {}
    for mode, on in (("watchers off", False), ("watchers on", True)):
        order = {"task": "softmax", "refuse_introspection": on, "refuse_surroundings": on,
                 "jobs": [[CANDIDATE, list(shape), DTYPE, True] for shape in SHAPES]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            json.dump(order, handle)
        orders[mode] = handle.name
    try:
        if args.profile:
            print(_run(orders["watchers on"], profile=True))
        seconds: dict[str, list[float]] = {mode: [] for mode in orders}
        for n in range(args.runs):  # interleaved: a slow spell of the host hits both
            for mode, path in orders.items():
                result = _run(path)
                seconds[mode].append(result["seconds"])
                print(f"{mode} #{n}: {result['seconds']:.2f} s, rc {result['rc']}, "
                      f"{result['kernels']} kernels compiled", flush=True)
        for mode, values in seconds.items() if args.runs else ():
            print(f"{mode:>13}: median {statistics.median(values):.2f} s "
                  f"(min {min(values):.2f}, max {max(values):.2f}, {len(values)} runs)")
    finally:
        for path in orders.values():
            os.unlink(path)


if __name__ == "__main__":
    main()
