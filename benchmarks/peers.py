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
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.base import DTYPES, Task, all_tasks, load_candidate  # noqa: E402
from optimizer.sandbox import detect_environment  # noqa: E402
from optimizer.sandbox.hardware import measure_peaks  # noqa: E402
from optimizer.sandbox.timing import measure, rotating  # noqa: E402

log = logging.getLogger("peers")
RESULTS = Path(__file__).resolve().parent / "results"


# -- what a user would write instead ------------------------------------------------------
def softmax_eager(x):
    return torch.softmax(x, dim=-1)


def rmsnorm_eager(x, w, eps=1e-6):  # the Llama / Hugging Face formulation
    xf = x.float()
    return w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def swiglu_eager(gate, up):
    return F.silu(gate) * up


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_table(positions, head_dim, dtype):
    dims = torch.arange(0, head_dim, 2, device=positions.device).float()
    inv = 1.0 / (10000.0 ** (dims / head_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def attention_unfused(q, k, v, k_cache, v_cache, cache_len):
    """RoPE, cache write, SDPA: the pipeline the fused kernel replaces."""
    seq, head_dim = q.shape[2], q.shape[3]
    total = cache_len + seq
    positions = torch.arange(cache_len, total, device=q.device)
    cos, sin = rope_table(positions, head_dim, q.dtype)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    k_cache[:, :, cache_len:total] = k
    v_cache[:, :, cache_len:total] = v
    keys, values = k_cache[:, :, :total], v_cache[:, :, :total]
    if cache_len == 0:
        return F.scaled_dot_product_attention(q, keys, values, is_causal=True)
    visible = torch.arange(total, device=q.device)[None, :] <= positions[:, None]
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=visible)


def liger_peer(task_name: str) -> Callable | None:
    try:
        if task_name == "softmax":
            from liger_kernel.ops.softmax import LigerSoftmaxFunction
            return LigerSoftmaxFunction.apply
        if task_name == "rmsnorm":
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction
            return lambda x, w, eps=1e-6: LigerRMSNormFunction.apply(x, w, eps, 0.0, "llama", False)
        if task_name == "swiglu":
            from liger_kernel.ops.swiglu import LigerSiLUMulFunction
            return LigerSiLUMulFunction.apply
        if task_name == "rope":
            from liger_kernel.ops.rope import LigerRopeFunction
            return liger_rope(LigerRopeFunction)
    except ImportError as err:
        log.warning("Liger-Kernel not importable (%s): its column stays empty", err)
    return None


def liger_rope(fn):
    """Liger wants (batch, heads, seq, dim) and a cos/sin table; ours is (batch, seq, ...)."""
    def call(q, k, *rest):
        positions = torch.arange(q.shape[1], device=q.device)
        cos, sin = rope_table(positions, q.shape[-1], q.dtype)
        return fn(q.transpose(1, 2), k.transpose(1, 2), cos[None], sin[None])
    return call


def eager_peer(task: Task) -> Callable:
    table = {"softmax": softmax_eager, "rmsnorm": rmsnorm_eager, "swiglu": swiglu_eager,
             "attention": attention_unfused, "matmul": torch.matmul}
    return table.get(task.name, task.reference)


def peers_for(task: Task) -> dict[str, Callable]:
    eager = eager_peer(task)
    name = "cuBLAS" if task.name == "matmul" else (
        "unfused eager" if task.name == "attention" else "eager")
    peers = {name: eager}
    if task.name != "matmul":
        compiled = torch.compile(eager, dynamic=False)
        peers["unfused compiled" if task.name == "attention" else "compiled"] = compiled
    liger = liger_peer(task.name)
    if liger is not None:
        peers["liger"] = liger
    return peers


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


def bench_task(task: Task, dtype: str, peaks: dict, runs: Path | None = None) -> list[dict]:
    torch_dtype = DTYPES[dtype]
    naive = load_candidate(task.render(task.default_config), f"naive_{task.name}")
    ours = {"naive triton": naive.run}
    optimized = optimized_kernel(task, runs)
    if optimized is not None:
        ours["optimized triton"] = optimized.run
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
    # 15% slack: reads stream faster than the copy that measured the peak (read + write)
    suspect = [k for k in (*ours, *peers) if row.get(k) is not None and row[k] < 0.85 * floor]
    if suspect:
        row["suspect"] = suspect
    best = min((row[k] for k in peers if row.get(k) and k not in suspect), default=None)
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
