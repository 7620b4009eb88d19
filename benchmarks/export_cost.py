"""The exported op on a model's shapes beside its torch peers: eager call time and GPU time.

What a user who puts the exported op into a model pays (issue 48): per shape that
Llama / Qwen / Mixtral run (kernels/model_shapes.py, decode at the given batch sizes over a
KV cache, prefill of batch x seq tokens), each implementation is checked against the
task's reference on the shape (a first and a repeat call) and then timed three ways:

- ``eager``: wall µs per call of back-to-back calls, one sync a batch, the
  implementations interleaved batch by batch (host_cost.eager_us); median and the 95%
  interval of the median (bootstrap over ``--repeats`` batches);
- ``warm``: GPU µs per call from ``--graph-calls`` calls captured in one CUDA graph and
  replayed (inputs stay in L2 between calls); median and interval over ``--repeats``;
- ``flushed``: GPU µs of one captured call after 256 MiB were written (L2 cold), CUDA
  events around the replay; median and interval over ``--repeats``.

Ours is the newest run's exported module in ``--runs`` (its dispatch table; else the
naive kernel): the ``torch.ops.kernelkb`` op and ``dispatch_run`` run the launch plan
(kernels/plan_bind.py); ``run() per call`` is the same module imported with
``KERNELKB_LAUNCH_PLAN=0`` (the path before the plan). Peers: the task's own
(kernels/peers.py: eager, torch.compile, cuBLAS for matmul, Liger where installed).

    python -m benchmarks.export_cost [--tasks matmul softmax] [--models llama-3-8b ...]

Without a CUDA GPU everything runs in the Triton interpreter on the tasks' CPU shapes as
a correctness check: no figure is written, as CPU times say nothing of a GPU's.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch

ON_GPU = torch.cuda.is_available()
if not ON_GPU:  # before triton is imported: the kernels run in the interpreter
    os.environ["TRITON_INTERPRET"] = "1"
HERE = Path(__file__).resolve().parent

from benchmarks.host_cost import best_kernel, checked, eager_us, peers_for_cpu  # noqa: E402
from kernelkb.kernels.base import Task  # noqa: E402
from kernelkb.kernels.candidate_loading import load_candidate  # noqa: E402
from kernelkb.kernels.discovery import get_task  # noqa: E402
from kernelkb.kernels.dtypes import DTYPES  # noqa: E402
from kernelkb.kernels.model_config import read_model_config  # noqa: E402
from kernelkb.kernels.model_shapes import model_shapes  # noqa: E402
from kernelkb.kernels.peers import Peer, peers_for  # noqa: E402
from kernelkb.optimizer.export import export_module  # noqa: E402

log = logging.getLogger("export_cost")
FLUSH_BYTES = 256 * 2**20  # over five H200 L2s (50 MiB)
# a batch of back-to-back calls (eager) or graphed calls (warm) lasts about this long, at
# most --calls / --graph-calls calls: a 10 ms prefill matmul needs no 50-call batches to
# time it, and they made one model's matmul shapes take 500 s
BATCH_MS = 5.0


def calls_for(call_ms: float, most: int) -> int:
    """Calls a batch: ``BATCH_MS`` of work, at least 3, at most ``most``."""
    return max(3, min(most, math.ceil(BATCH_MS / max(call_ms, 1e-3))))


def one_call_ms(call: Callable[[], Any]) -> float:
    """Wall ms of one call after two warm ones (synchronised): what sizes the batches."""
    for _ in range(2):
        call()
    torch.cuda.synchronize()
    began = time.perf_counter()
    call()
    torch.cuda.synchronize()
    return (time.perf_counter() - began) * 1e3


def interval(samples: list[float], seed: int = 0) -> tuple[float, float, float]:
    """(median, low, high): the 95% bootstrap interval of the median."""
    data = np.asarray(samples, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(data, size=(2000, len(data))), axis=1)
    return float(np.median(data)), float(np.quantile(medians, 0.025)), \
        float(np.quantile(medians, 0.975))


def warm_us(call: Callable[[], Any], calls: int, repeats: int) -> list[float]:
    """GPU µs per call: ``calls`` calls in one graph, replayed ``repeats`` times."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            call()
    graph.replay()
    out = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / calls)
    return out


def flushed_us(call: Callable[[], Any], repeats: int) -> list[float]:
    """GPU µs of one graphed call right after L2 was overwritten."""
    scratch = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    out = []
    for _ in range(repeats):
        scratch.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3)
    return out


def ours(task: Task, dtype: str, runs: Path | None, folder: Path) -> tuple[dict[str, Peer], str]:
    """Our exported op, with the launch plan and (the path before it) run() per call."""
    source, table, origin = best_kernel(task, runs)
    impls: dict[str, Peer] = {}
    for plan in (True, False):
        namespace = "kernelkb" if plan else "kernelkb_runcall"
        name = f"kkb_cost_{task.name}_{'plan' if plan else 'run'}"
        path = export_module(task, source, folder / f"{name}.py", dtype=dtype, table=table,
                             namespace=namespace)
        os.environ["KERNELKB_LAUNCH_PLAN"] = "1" if plan else "0"
        try:
            module = load_candidate(path.read_text(), name)
        finally:
            os.environ.pop("KERNELKB_LAUNCH_PLAN", None)
        entry = module.dispatch_run if table else module.launch
        if plan:
            impls["ours: dispatch_run (plan)" if table else "ours: launch (plan)"] = \
                Peer("ours", entry, origin)
            op = getattr(torch.ops.kernelkb, task.name, None)
            if op is not None:
                impls["ours: torch.ops op (plan)"] = Peer("ours op", op, origin)
        else:
            impls["ours: run() per call"] = Peer("ours run", entry, origin)
    return impls, origin


def shapes_for(task: Task, models: list[str], batches: list[int], seqs: list[int]
               ) -> list[tuple[tuple[int, ...], str]]:
    """(shape, where from) for each model's shapes of ``task``, each shape once, taken in
    turn from each (model, phase): a ``--max-shapes`` cut keeps decode and every model,
    not the first model's prefill alone (the first H100 run's 24 of 70 matmul shapes)."""
    found: dict[tuple[int, ...], list[str]] = {}
    groups: dict[tuple[str, str], list[tuple[int, ...]]] = {}
    for model in models:
        shapes = model_shapes(task, read_model_config(model), batches, seqs)
        for use in shapes.uses:
            shape = tuple(use.shape)
            if shape not in found:
                groups.setdefault((model, use.phase), []).append(shape)
            found.setdefault(shape, []).append(f"{model} {use.phase} {use.what}")
    turns = itertools.zip_longest(*groups.values())  # each group's first, then second, ...
    return [(shape, "; ".join(found[shape][:2])) for turn in turns for shape in turn
            if shape is not None]


def bench(task: Task, dtype: str, args: argparse.Namespace, folder: Path
          ) -> list[dict[str, Any]]:
    mine, origin = ours(task, dtype, args.runs, folder)
    peers = peers_for(task) if ON_GPU else peers_for_cpu(task)
    impls = {**mine, **peers}
    if ON_GPU:
        shapes = shapes_for(task, args.models, args.batch, args.seq)[:args.max_shapes]
    else:
        shapes = [(s, "task CPU shape") for s in task.cpu_shapes]
    rows: list[dict[str, Any]] = []
    for shape, where in shapes:
        label = task.shape_label(shape)
        calls: dict[str, Callable[[], Any]] = {}
        took: list[float] = []  # ms of one call of each implementation timed
        here = []
        for name, impl in impls.items():
            row: dict[str, Any] = {"task": task.name, "shape": label, "from": where,
                                   "impl": name}
            here.append(row)
            reason = checked(task, impl, dtype, shape, "cuda" if ON_GPU else "cpu")
            if reason:
                row["error"] = f"dropped: {reason}"
                log.warning("%s %s %s dropped: %s", task.name, label, name, reason)
                continue
            row["checked"] = True
            if not ON_GPU:
                continue
            inputs = task.make_inputs(shape, DTYPES[dtype], 0, "cuda")
            call = (lambda fn, xs: lambda: fn(*xs))(impl.fn, inputs)
            try:
                took.append(one_call_ms(call))
                row["warm_us"] = interval(warm_us(call, calls_for(took[-1], args.graph_calls),
                                                  args.repeats))
                row["flushed_us"] = interval(flushed_us(call, args.repeats))
                calls[name] = call
            except Exception as err:  # noqa: BLE001 - an implementation that cannot graph
                row["error"] = repr(err)[:200]
        if calls:
            batches = eager_batches(calls, calls_for(min(took), args.calls), args.repeats)
            for row in here:
                if row["impl"] in batches:
                    row["eager_us"] = interval(batches[row["impl"]])
        rows += here
        for row in here:
            log.info("%s", {k: v for k, v in row.items() if k not in ("from", "task")})
    log.info("%s: ours from %s", task.name, origin)
    return rows


def eager_batches(calls: dict[str, Callable[[], Any]], per_batch: int, repeats: int
                  ) -> dict[str, list[float]]:
    """Every batch's µs per call (host_cost.eager_us, one batch a repeat, interleaved)."""
    out: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, (med, _, _) in eager_us(calls, per_batch, 1).items():
            out[name].append(med)
    return out


def _cell(value: Any) -> str:
    if not value:
        return "-"
    med, low, high = value
    return f"{med:.1f} [{low:.1f}, {high:.1f}]"


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# Exported op against its peers on model shapes ({meta['gpu']}, {meta['dtype']})",
             "", f"{meta['when']}; torch {meta['torch']}, triton {meta['triton']}. µs per call: "
             "median [95% interval of the median] over "
             f"{meta['repeats']} repeats. eager: wall time of back-to-back calls "
             f"(at most {meta['calls']} a batch, about {BATCH_MS:g} ms of calls); warm: "
             f"CUDA-graph replay of at most {meta['graph_calls']} calls (sized alike; L2 "
             "warm); flushed: one graphed call after 256 MiB written (L2 cold). "
             "vs best peer: the best checked peer's median / ours (op), above 1 ours is "
             "faster.", "",
             "| task | shape | from | impl | eager µs | warm GPU µs | flushed GPU µs |",
             "|---|---|---|---|---:|---:|---:|"]
    for row in rows:
        if row.get("error"):
            lines.append(f"| {row['task']} | {row['shape']} | {row['from']} | {row['impl']} "
                         f"| {row['error'][:60]} | | |")
            continue
        lines.append(f"| {row['task']} | {row['shape']} | {row['from']} | {row['impl']} | "
                     f"{_cell(row.get('eager_us'))} | {_cell(row.get('warm_us'))} | "
                     f"{_cell(row.get('flushed_us'))} |")
    lines += ["", "## vs best peer (ours: the torch.ops op)", "",
              "| task | shape | eager | warm GPU | flushed GPU |", "|---|---|---:|---:|---:|"]
    for (task, shape), group in _groups(rows).items():
        op = next((r for r in group if r["impl"] == "ours: torch.ops op (plan)"
                   and "eager_us" in r), None)
        if op is None:
            continue
        cells = []
        for key in ("eager_us", "warm_us", "flushed_us"):
            peers = [(r[key][0], r["impl"]) for r in group
                     if not r["impl"].startswith("ours") and r.get(key)]
            best = min(peers) if peers else None
            cells.append(f"{best[0] / op[key][0]:.2f}x ({best[1]})" if best else "-")
        lines.append(f"| {task} | {shape} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["task"], row["shape"]), []).append(row)
    return groups


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", default=["matmul", "softmax", "rmsnorm", "swiglu"])
    ap.add_argument("--models", nargs="+", default=["llama-3-8b", "qwen2.5-7b",
                                                    "mixtral-8x7b"])
    ap.add_argument("--batch", type=_ints, default=[1, 8, 32])
    ap.add_argument("--seq", type=_ints, default=[512, 4096])
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--calls", type=int, default=50, help="eager calls a batch")
    ap.add_argument("--graph-calls", type=int, default=20)
    ap.add_argument("--max-shapes", type=int, default=24, help="per task")
    ap.add_argument("--runs", type=Path, default=HERE / "runs")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    rows: list[dict[str, Any]] = []
    text = ""
    with tempfile.TemporaryDirectory(prefix="export_cost_") as folder:
        for name in args.tasks:
            rows += bench(get_task(name), args.dtype, args, Path(folder))
            if ON_GPU:  # after each task: a run cut short by its time limit keeps its table
                text = save(rows, args)
    bad = [r for r in rows if r.get("error") and r["impl"].startswith("ours")]
    if not ON_GPU:
        print(f"CPU (Triton interpreter): correctness only, nothing timed. "
              f"{sum('checked' in r for r in rows)} checked, {len(bad)} of ours failed.")
        return 1 if bad else 0
    print(text)
    return 1 if bad else 0


def save(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    """The rows so far as JSON and a markdown table under ``--out``; returns the table."""
    import triton

    gpu = torch.cuda.get_device_name()
    meta = {"gpu": gpu, "dtype": args.dtype, "torch": torch.__version__,
            "triton": triton.__version__, "repeats": args.repeats, "calls": args.calls,
            "graph_calls": args.graph_calls,
            "when": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    out = args.out or Path(os.environ.get("OUT") or HERE / "results")
    out.mkdir(parents=True, exist_ok=True)
    stem = f"export_cost_{gpu.replace(' ', '_')}_{args.dtype}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = markdown(rows, meta)
    (out / f"{stem}.md").write_text(text)
    return text


if __name__ == "__main__":
    sys.exit(main())
