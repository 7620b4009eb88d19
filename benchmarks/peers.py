"""Each task's Triton kernels (naive, and with --runs the newest optimized export) beside
the peers a user would pick instead, on the GPU.

Peers (kernels/peers.py says how each is called): PyTorch eager, torch.compile
(dynamic=False), Liger-Kernel where it has the op (softmax, RMSNorm, SwiGLU, RoPE), cuBLAS
for matmul, and for the fused attention the unfused pipeline (RoPE, cache write, SDPA)
eager and compiled. Every implementation is checked against the reference on each shape
before it is timed (optimizer/peers.py); each figure is a pair, the eager call and the GPU
time replayed from a CUDA graph. One run on one GPU, with the peaks (copy bandwidth, bf16
matmul) measured in the same run. Writes benchmarks/results/peers_<gpu>_<dtype>.{json,md};
exits non-zero if a figure is under the roofline floor (a failure to explain).

    python benchmarks/peers.py [--tasks softmax rmsnorm] [--dtype float16] [--runs DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

from kernelkb.kernels.base import Task
from kernelkb.kernels.candidate_loading import load_candidate
from kernelkb.kernels.discovery import all_tasks
from kernelkb.kernels.dtypes import DTYPES
from kernelkb.kernels.peers import Peer, peers_for
from kernelkb.kernels.shared.stats import geomean
from kernelkb.optimizer.peers import below_floor, time_peers, trustworthy
from kernelkb.optimizer.sandbox import detect_environment
from kernelkb.optimizer.sandbox.hardware import measure_peaks
from kernelkb.optimizer.sandbox.timing import floor_ms

log = logging.getLogger("peers")
RESULTS = Path(__file__).resolve().parent / "results"


# -- the run ------------------------------------------------------------------------------
def optimized_kernel(task: Task, runs: Path | None):
    """The newest best kernel that `kernelkb optimize` exported for this task, if any.
    Newest by the run folder's name (TASK-YYYYmmddTHHMMSS-...): file times do not survive
    the copy to and from a GPU host."""
    if runs is None:
        return None
    found = sorted(runs.glob(f"*/best_{task.name}.py"), key=lambda p: p.parent.name)
    if not found:
        return None
    log.info("%s: optimized kernel %s", task.name, found[-1])
    return load_candidate(found[-1].read_text(), f"optimized_{task.name}")


def our_kernels(task: Task, runs: Path | None) -> dict:
    """{"naive triton": run, "optimized triton": run (if a run exported one)}."""
    naive = load_candidate(task.render(task.default_config), f"naive_{task.name}")
    ours = {"naive triton": naive.run}
    optimized = optimized_kernel(task, runs)
    if optimized is not None:  # an export with a dispatch table runs each regime's entry
        ours["optimized triton"] = getattr(optimized, "dispatch_run", optimized.run)
    return ours


def bench_task(task: Task, dtype: str, peaks: dict,
               runs: Path | None = None) -> tuple[list[dict], dict[str, str]]:
    """Per sweep shape: every implementation checked against the reference, then timed
    (eager call and CUDA-graph replay) if it passed, else dropped with the reason."""
    torch._dynamo.config.cache_size_limit = 64
    impls = {**{label: Peer(label, fn, "ours") for label, fn in our_kernels(task, runs).items()},
             **peers_for(task)}
    rows = []
    for shape in task.sweep_shapes:
        times = time_peers(task, dtype, [shape], peers=impls)
        label = task.shape_label(shape)
        row = {"task": task.name, "shape": label, "dtype": dtype,
               "times": {name: {"call": ms, "graph": times.graph[label].get(name)}
                         for name, ms in times.eager[label].items()},
               "dropped": times.dropped[label]}
        analyse(row, task, shape, peaks)
        rows.append(row)
        log.info("%s %s: %s; dropped %s", task.name, label,
                 {k: (round(v["call"], 4), v["graph"] and round(v["graph"], 4))
                  for k, v in row["times"].items()}, row["dropped"])
    return rows, {name: p.how for name, p in impls.items() if name not in OUR_COLUMNS}


OUR_COLUMNS = ("naive triton", "optimized triton")


def analyse(row: dict, task: Task, shape: tuple, peaks: dict) -> None:
    """Share of peak, ratio to the best peer (call figures: the fastest checked peer whose
    figure the roofline allows; graph figures: the fastest checked peer), and the figures
    under the roofline floor, which are failures to explain."""
    torch_dtype = DTYPES[row["dtype"]]
    nbytes, nflops = task.bytes_moved(shape, torch_dtype), task.flops(shape, torch_dtype)
    floor = floor_ms(nbytes, nflops, peaks)
    calls = {k: v["call"] for k, v in row["times"].items()}
    graphs = {k: v["graph"] for k, v in row["times"].items() if v["graph"] is not None}
    row["floor ms"] = floor
    row["below floor"] = below_floor(calls, floor)
    possible = trustworthy(calls, floor)
    peer_calls = {k: v for k, v in possible.items() if k not in OUR_COLUMNS}
    peer_graphs = {k: v for k, v in graphs.items() if k not in OUR_COLUMNS}
    best = min(peer_calls.items(), key=lambda kv: kv[1]) if peer_calls else None
    best_graph = min(peer_graphs.items(), key=lambda kv: kv[1]) if peer_graphs else None
    row["best peer"] = best and {"name": best[0], "ms": best[1]}
    row["best peer graph"] = best_graph and {"name": best_graph[0], "ms": best_graph[1]}
    for label in OUR_COLUMNS:
        if label not in row["times"]:
            continue
        short = label.split()[0]
        ms, graph = calls[label], graphs.get(label)
        share = (nflops / ms / 1e9 / peaks["peak_tflops"]) if task.compute_bound else (
            nbytes / ms / 1e6 / peaks["mem_bandwidth_gbps"])
        row[f"{short} % of peak"] = 100 * share
        row[f"{short} vs best peer"] = best[1] / ms if best else None
        row[f"{short} vs best peer (GPU)"] = best_graph[1] / graph if best_graph and graph \
            else None


def reanalyse(path: Path) -> str:
    """Recompute the derived columns of a results file (same measurements) and its table."""
    data = json.loads(path.read_text())
    tasks = all_tasks()
    for row in data["rows"]:
        task = tasks[row["task"]]
        shape = next(s for s in task.sweep_shapes if task.shape_label(s) == row["shape"])
        analyse(row, task, shape, data["peaks"])
    path.write_text(json.dumps(data, indent=1))
    text = markdown(data["rows"], data["env"], data["peaks"], data["rows"][0]["dtype"],
                    data.get("how", {}), data.get("command", ""))
    path.with_suffix(".md").write_text(text)
    return text


def markdown(rows: list[dict], env: dict, peaks: dict, dtype: str, how: dict,
             command: str) -> str:
    lines = [
        f"# Triton kernels vs peers on {env['gpu_name']} ({dtype})",
        "",
        f"`{command}`; triton {env['triton_version']}, torch {env['torch_version']}, "
        f"CUDA {env['cuda_version']}; measured peaks in the same run: copy "
        f"{peaks['mem_bandwidth_gbps']:.0f} GB/s (read + write), bf16 matmul "
        f"{peaks['peak_tflops']:.0f} TFLOP/s.",
        "",
        "Every implementation (ours and the peers) was checked against the task's reference "
        "on each shape before it was timed, with the candidates' rule (no element over the "
        "task's tolerance, no systematic bias); one that failed is dropped from that shape "
        "(reasons below the task's table). Each cell: **eager call** (median ms of "
        "`triton.testing.do_bench`, L2 flushed, inputs rotated over 3 sets: what an eager "
        "caller waits for, launch path included) / **GPU time** (the same calls replayed from "
        "a CUDA graph: no host work, L2 not flushed). 'vs best peer' > 1: our kernel is "
        "faster than the fastest checked peer (call figures; '(GPU)': graph figures). A call "
        "figure under the roofline floor (bytes at the copy bandwidth, FLOPs at the matmul "
        "rate, 15% slack) is marked **BELOW FLOOR**: a failure to explain, never the best "
        "peer.",
        "",
    ]
    for task in dict.fromkeys(r["task"] for r in rows):
        trows = [r for r in rows if r["task"] == task]
        present = list(dict.fromkeys(c for r in trows for c in (*r["times"], *r["dropped"])))
        listed = [k.split("/", 1)[1] for k in how if k.startswith(f"{task}/")]  # peers_for order
        impls = [c for c in (*OUR_COLUMNS, *listed) if c in present]
        impls += [c for c in present if c not in impls]
        derived = [c for c in ("naive % of peak", "naive vs best peer",
                               "naive vs best peer (GPU)", "optimized % of peak",
                               "optimized vs best peer", "optimized vs best peer (GPU)")
                   if any(r.get(c) is not None for r in trows)]
        lines += [f"## {task}", "", "| shape | " + " | ".join(impls + derived) + " |",
                  "|---|" + "---:|" * (len(impls) + len(derived))]
        notes, failures = [], []
        for r in trows:
            cells = []
            for name in impls:
                if name in r["dropped"]:
                    notes.append(f"{name} at {r['shape']}: {r['dropped'][name]}")
                    cells.append(f"dropped [{len(notes)}]")
                elif name in r["times"]:
                    t = r["times"][name]
                    flag = " **BELOW FLOOR**" if name in r["below floor"] else ""
                    cells.append(f"{_fmt(t['call'])} / {_fmt(t['graph'])}{flag}")
                else:
                    cells.append("–")
            failures += [f"{name} at {r['shape']}: {ms:.4f} ms < floor {r['floor ms']:.4f} ms"
                         for name, ms in r["below floor"].items()]
            lines.append(f"| {r['shape']} | " + " | ".join(cells + [_fmt(r.get(c))
                                                                   for c in derived]) + " |")
        for col in derived:
            ratios = [r[col] for r in trows if col.split()[1] == "vs" and r.get(col)]
            if ratios:
                gm = geomean(ratios)
                lines += ["", f"geomean {col}: {gm:.2f}x over {len(ratios)} shapes"]
        peers_here = [n for n in impls if n not in OUR_COLUMNS]
        lines += ["", "Peers: " + "; ".join(f"**{n}**: {how.get(f'{task}/{n}', '?')}"
                                         for n in peers_here)]
        if notes:
            lines += ["", "Dropped (not timed):", ""]
            lines += [f"{i}. {text}" for i, text in enumerate(notes, 1)]
        if failures:
            lines += ["", "**Failures to explain** (faster than the roofline allows):", ""]
            lines += [f"- {f}" for f in failures]
        lines.append("")
    return "\n".join(lines) + "\n"


def _fmt(value) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}" if value < 10 else f"{value:.1f}"
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="*", default=None)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--runs", type=Path, default=None,
                        help="folder of `kernelkb optimize` runs: adds their best kernels")
    parser.add_argument("--tag", default="", help="suffix of the result files")
    parser.add_argument("--reanalyse", type=Path, default=None,
                        help="recompute the table of a results JSON (no GPU needed)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if args.reanalyse:
        print(reanalyse(args.reanalyse))
        return
    if not torch.cuda.is_available():
        sys.exit("peers.py needs a CUDA GPU (run it on the H200 through the device tool)")
    peaks = measure_peaks()
    env = detect_environment(peaks)
    tasks = all_tasks()
    rows, how = [], {}
    command = "python benchmarks/peers.py " + " ".join(sys.argv[1:])
    stem = RESULTS / f"peers_{env['gpu_name'].split()[-1].lower()}_{args.dtype}{args.tag}"
    RESULTS.mkdir(exist_ok=True)
    for name in args.tasks or list(tasks):
        task_rows, task_how = bench_task(tasks[name], args.dtype, peaks, args.runs)
        rows += task_rows
        how.update({f"{name}/{k}": v for k, v in task_how.items()})
        text = markdown(rows, env, peaks, args.dtype, how, command)  # after each task
        stem.with_suffix(".json").write_text(json.dumps({
            "env": env, "peaks": peaks, "rows": rows, "how": how, "command": command,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=1))
        stem.with_suffix(".md").write_text(text)
    print(text)
    failures = [(r["task"], r["shape"], k) for r in rows for k in r["below floor"]]
    if failures:
        sys.exit(f"figures under the roofline floor, to explain: {failures}")


if __name__ == "__main__":
    main()
