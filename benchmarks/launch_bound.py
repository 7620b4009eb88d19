"""Small shapes on the GPU: how much of a figure is the kernel and how much the launch path.

Every other table times with ``triton.testing.do_bench`` (events around each call, L2
flushed between calls). Under ~30 µs that figure also holds whatever host work of the
call the GPU waited for (Python wrapper, Triton's launcher, torch.compile's guards), and
it moved up to 5x between processes on the lent H200. For the smallest sweep shapes of
every task, this times each implementation (naive and optimized Triton, the peers) three
ways, in one process, each after it was checked against the task's reference on the
shape (optimizer/peers.py; a wrong one gets the reason instead of figures):

- ``do_bench``: as everywhere else, repeated ``--repeats`` times (min and max shown);
- ``graph``: the same calls captured in a CUDA graph and replayed
  (``triton.testing.do_bench_cudagraph``): GPU time alone, no host work; L2 is not
  flushed between the calls of the graph;
- ``host``: wall time per call of many back-to-back calls, synchronised once at the end:
  what an eager caller pays per call, launch path included.

    python -m benchmarks.launch_bound [--tasks rope softmax] [--shapes 2] [--runs benchmarks/runs]

Writes benchmarks/results/launch_bound_<gpu>_<dtype>.{json,md}. Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from benchmarks.peers import our_kernels
from kernelkb.kernels.base import Task
from kernelkb.kernels.discovery import all_tasks
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, peers_for
from kernelkb.optimizer.peers import check_peer
from kernelkb.optimizer.sandbox import detect_environment
from kernelkb.optimizer.sandbox.timing import graph_ms, measure, rotating

log = logging.getLogger("launch_bound")
RESULTS = Path(__file__).resolve().parent / "results"


def host_ms(call: Callable[[], Any], calls: int = 300) -> float:
    """Wall ms per call over back-to-back calls, one synchronise at the end."""
    call()
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(calls):
        call()
    torch.cuda.synchronize()
    return (time.perf_counter() - began) * 1e3 / calls


def bench_task(task: Task, dtype: str, n_shapes: int, repeats: int,
               runs: Path | None) -> list[dict[str, Any]]:
    """Each implementation checked against the reference on the shape, then timed three
    ways; a wrong one gets a row with the reason instead of figures."""
    torch_dtype = DTYPES[dtype]
    impls = {**{k: Peer(k, fn, "ours") for k, fn in our_kernels(task, runs).items()},
             **peers_for(task)}
    shapes = sorted(task.sweep_shapes, key=lambda s: task.bytes_moved(s, torch_dtype))
    rows = []
    for shape in shapes[:n_shapes]:
        for label, impl in impls.items():
            row: dict[str, Any] = {"task": task.name, "shape": task.shape_label(shape),
                                   "impl": label}
            reason = check_peer(task, impl, dtype, shape)
            if reason:
                log.warning("%s %s %s dropped: %s", task.name, row["shape"], label, reason)
                row["error"] = f"dropped: {reason}"
                rows.append(row)
                continue
            sets = [task.make_inputs(shape, torch_dtype, seed, "cuda") for seed in range(3)]
            call = rotating(impl.fn, sets)
            try:
                benches = [measure(call, passes=1)[0] for _ in range(repeats)]  # raw spread
                row.update(do_bench_min=min(benches), do_bench_max=max(benches),
                           graph=graph_ms(call), host=host_ms(call))
            except Exception as err:  # noqa: BLE001 - a peer that cannot run this shape
                log.warning("%s %s %s: %s", task.name, row["shape"], label, repr(err)[:160])
                row["error"] = repr(err)[:160]
            rows.append(row)
            log.info("%s", {k: round(v, 4) if isinstance(v, float) else v
                            for k, v in row.items()})
    return rows


def markdown(rows: list[dict[str, Any]], env: dict[str, Any], dtype: str, command: str) -> str:
    def ms(value: float | None) -> str:
        return "–" if value is None else f"{value * 1000:.1f}"

    lines = [
        f"# Launch-bound shapes on {env.get('gpu_name')} ({env.get('arch')}), {dtype}",
        "",
        f"Command: `{command}`; triton {env.get('triton_version')}, torch "
        f"{env.get('torch_version')}. Times in **µs** per call. do_bench: min–max of the "
        "repeats (events around each call, L2 flushed); graph: replayed from a CUDA graph "
        "(GPU time only, L2 not flushed); host: wall time per call of back-to-back calls "
        "(what an eager caller pays). host ≫ graph: the call is bound by its launch path.",
        "",
        "| task | shape | implementation | do_bench (µs) | graph (µs) | host (µs) |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['task']} | {r['shape']} | {r['impl']} | "
                         f"{r['error'][:300]} | | |")
            continue
        lines.append(f"| {r['task']} | {r['shape']} | {r['impl']} | "
                     f"{ms(r['do_bench_min'])}–{ms(r['do_bench_max'])} | {ms(r['graph'])} | "
                     f"{ms(r['host'])} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--shapes", type=int, default=2, help="smallest sweep shapes per task")
    parser.add_argument("--repeats", type=int, default=5, help="do_bench repeats per shape")
    parser.add_argument("--runs", type=Path, default=None,
                        help="folder of `kernelkb optimize` runs: adds their best kernels")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if not torch.cuda.is_available():
        sys.exit("launch_bound.py needs a CUDA GPU (run it on the H200 through the device tool)")
    torch._dynamo.config.cache_size_limit = 64
    env = detect_environment(None)
    tasks = all_tasks()
    rows: list[dict[str, Any]] = []
    command = "python -m benchmarks.launch_bound " + " ".join(sys.argv[1:])
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"launch_bound_{env['gpu_name'].split()[-1].lower()}_{args.dtype}"
    for name in args.tasks or list(tasks):
        rows += bench_task(tasks[name], args.dtype, args.shapes, args.repeats, args.runs)
        stem.with_suffix(".json").write_text(json.dumps({  # after each task
            "env": env, "rows": rows, "command": command,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1))
        text = markdown(rows, env, args.dtype, command)
        stem.with_suffix(".md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
