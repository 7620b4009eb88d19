"""Each task's naive Triton kernel beside the peers a user would pick instead, on the GPU.

Peers: PyTorch eager, torch.compile (dynamic=False, so each shape gets its own kernel),
Liger-Kernel where it has the op (softmax, RMSNorm, SwiGLU, RoPE), cuBLAS for matmul, and
for the fused attention the unfused pipeline (RoPE, cache write, SDPA) eager and compiled.
Every figure comes from one run on one GPU, with the peaks (copy bandwidth, bf16 matmul)
measured in the same run. Writes benchmarks/results/peers_<gpu>.{json,md}.

    python benchmarks/peers.py [--tasks softmax rmsnorm] [--dtype float16]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.base import DTYPES, Task, all_tasks, load_candidate  # noqa: E402
from kernels.peers import peers_for  # noqa: E402
from optimizer.peers import trustworthy  # noqa: E402
from optimizer.sandbox import detect_environment  # noqa: E402
from optimizer.sandbox.hardware import measure_peaks  # noqa: E402
from optimizer.sandbox.timing import measure, rotating  # noqa: E402

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
    if optimized is not None:
        ours["optimized triton"] = optimized.run
    return ours


def bench_task(task: Task, dtype: str, peaks: dict, runs: Path | None = None) -> list[dict]:
    torch_dtype = DTYPES[dtype]
    ours = our_kernels(task, runs)
    peers = peers_for(task)
    rows = []
    torch._dynamo.config.cache_size_limit = 64
    for shape in task.sweep_shapes:
        sets = [task.make_inputs(shape, torch_dtype, seed, "cuda") for seed in range(3)]
        row = {"task": task.name, "shape": task.shape_label(shape), "dtype": dtype}
        for label, fn in {**ours, **peers}.items():
            try:
                row[label] = measure(rotating(fn, sets))[0]
            except Exception as err:  # a peer that cannot run this shape: say so, go on
                log.warning("%s %s %s: %s", task.name, row["shape"], label, repr(err)[:200])
                row[label] = None
        analyse(row, task, shape, peaks, list(ours), list(peers))
        rows.append(row)
        log.info("%s %s: %s", task.name, row["shape"],
                 {k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                  if k not in ("task", "shape", "dtype")})
    return rows


OUR_COLUMNS = ("naive triton", "optimized triton")
DERIVED = ("suspect", "best peer ms", "naive % of peak", "naive vs best peer",
           "optimized % of peak", "optimized vs best peer", "naive GB/s", "naive TFLOP/s")


def analyse(row: dict, task: Task, shape: tuple, peaks: dict, ours: list[str],
            peers: list[str]) -> None:
    """Share of peak and ratio to the best trustworthy peer. A time under the roofline
    floor (measured copy bandwidth / matmul rate) cannot be real: it is listed as suspect
    and kept out of 'best peer'."""
    torch_dtype = DTYPES[row["dtype"]]
    nbytes, nflops = task.bytes_moved(shape, torch_dtype), task.flops(shape, torch_dtype)
    floor = max(nbytes / (peaks["mem_bandwidth_gbps"] * 1e6),
                nflops / (peaks["peak_tflops"] * 1e9))
    possible = trustworthy({k: row.get(k) for k in (*ours, *peers)}, floor)
    suspect = [k for k in (*ours, *peers) if row.get(k) is not None and k not in possible]
    if suspect:
        row["suspect"] = suspect
    best = min((possible[k] for k in peers if k in possible), default=None)
    row["best peer ms"] = best
    for label in ours:
        ms = row.get(label)
        if not ms:
            continue
        short = label.split()[0]
        share = (nflops / ms / 1e9 / peaks["peak_tflops"]) if task.compute_bound else (
            nbytes / ms / 1e6 / peaks["mem_bandwidth_gbps"])
        row[f"{short} % of peak"] = 100 * share
        row[f"{short} vs best peer"] = best / ms if best else None


def reanalyse(path: Path) -> str:
    """Recompute the derived columns of a results file (same measurements) and its table."""
    data = json.loads(path.read_text())
    tasks = all_tasks()
    for row in data["rows"]:
        task = tasks[row["task"]]
        shape = next(s for s in task.sweep_shapes if task.shape_label(s) == row["shape"])
        for key in DERIVED:
            row.pop(key, None)
        measured = [k for k in row if k not in ("task", "shape", "dtype")]
        analyse(row, task, shape, data["peaks"], [k for k in measured if k in OUR_COLUMNS],
                [k for k in measured if k not in OUR_COLUMNS])
    path.write_text(json.dumps(data, indent=1))
    text = markdown(data["rows"], data["env"], data["peaks"], data["rows"][0]["dtype"])
    path.with_suffix(".md").write_text(text)
    return text


def markdown(rows: list[dict], env: dict, peaks: dict, dtype: str) -> str:
    lines = [
        f"# Naive Triton kernels vs peers on {env['gpu_name']} ({dtype})",
        "",
        f"triton {env['triton_version']}, torch {env['torch_version']}, "
        f"CUDA {env['cuda_version']}; "
        f"measured peaks in the same run: copy {peaks['mem_bandwidth_gbps']:.0f} GB/s "
        f"(read + write), bf16 matmul {peaks['peak_tflops']:.0f} TFLOP/s. Median ms of "
        "`triton.testing.do_bench` (L2 flushed, inputs rotated over 3 sets). "
        "'vs best peer' > 1 means our kernel is faster than the fastest peer; a figure under "
        "the roofline floor (measured copy bandwidth / matmul rate) is listed as suspect and "
        "left out of 'best peer'.",
        "",
    ]
    for task in dict.fromkeys(r["task"] for r in rows):
        trows = [r for r in rows if r["task"] == task]
        cols = list(dict.fromkeys(c for r in trows for c in r
                                  if c not in ("task", "dtype", "best peer ms")))
        lines += [f"## {task}", "", "| " + " | ".join(cols) + " |",
                  "|" + "---|" * len(cols)]
        for r in trows:
            cells = [_fmt(r.get(c)) if c != "suspect" else ", ".join(r.get(c, []))
                     for c in cols]
            lines.append("| " + " | ".join(cells) + " |")
        for short in ("naive", "optimized"):
            ratios = [r[f"{short} vs best peer"] for r in trows if r.get(f"{short} vs best peer")]
            if ratios:
                gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
                lines += ["", f"geomean {short} vs best peer: {gm:.2f}x"]
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
    rows = []
    for name in args.tasks or list(tasks):
        rows += bench_task(tasks[name], args.dtype, peaks, args.runs)
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / f"peers_{env['gpu_name'].split()[-1].lower()}_{args.dtype}{args.tag}"
    stem.with_suffix(".json").write_text(json.dumps({
        "env": env, "peaks": peaks, "rows": rows,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/peers.py " + " ".join(sys.argv[1:])}, indent=1))
    stem.with_suffix(".md").write_text(markdown(rows, env, peaks, args.dtype))
    print(markdown(rows, env, peaks, args.dtype))


if __name__ == "__main__":
    main()
