"""What one evaluation costs, this checkout against an earlier one, side by side.

    git worktree add .out/base b41f618^      # the evaluator before the judge's process
    python benchmarks/eval_cost.py --base .out/base [--tasks softmax ...] [--repeats 3]
        [--setting profiler:KERNELKB_GPU_TIMESTAMPS=profiler ...]

Per task and repeat, each checkout evaluates the task's naive kernel against itself the
way the loop judges a candidate (``evaluate(..., parent=, parent_source=)`` on the
representative shapes, one seed; ``--shapes auto --no-parent`` on a CPU host: the
interpreter's shapes, no incumbent), each in a fresh Python process, the checkouts
alternating and the order turned every repeat so that drift reaches all. ``--setting
NAME:VAR=VALUE[,VAR=VALUE]`` adds an arm: this checkout with those settings in its
environment. The figure is
the wall time of the judged evaluation alone (the parent's own evaluation, made first in
the same process, is not counted). Prints every figure, the medians and the ratio; writes
``eval_cost_<gpu>.json`` and ``.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = """
import json, sys, time
try:  # the checkout measured may be an earlier one (--base): where get_task lived then
    from kernelkb.kernels.discovery import get_task
except ImportError:
    try:
        from kernelkb.kernels.base import get_task
    except ImportError:  # before the kernelkb package folder
        from kernels.base import get_task
try:
    from kernelkb.optimizer.sandbox import evaluate
except ImportError:
    from optimizer.sandbox import evaluate
task, shapes, with_parent = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
naive = get_task(task).template
began = time.perf_counter()
parent = evaluate(task, naive, shapes=shapes, seeds=1, timeout_s=900) if with_parent else None
parent_wall_s = time.perf_counter() - began
began = time.perf_counter()
result = evaluate(task, naive, shapes=shapes, seeds=1, parent=parent,
                  parent_source=naive if with_parent else None, timeout_s=900)
print(json.dumps({"wall_s": time.perf_counter() - began, "ok": result.ok,
                  "error": None if result.ok else f"{result.error_kind}: {result.error_message}",
                  "worker_laps_s": json.loads(result.artifacts.get("wall_s") or "{}"),
                  "worker_process_s": result.wall_s,
                  "interpreter_wait_s": result.artifacts.get("interpreter_wait_s"),
                  "judge": getattr(result, "judge", None), "parent_wall_s": parent_wall_s,
                  "trusted_compile": result.artifacts.get("trusted_compile"),
                  "trusted_layer_reads": result.artifacts.get("trusted_layer_reads")}))
"""


def one(tree: Path, task: str, setting: dict[str, str], shapes: str = "representative",
        parent: bool = True) -> dict:
    env = {**os.environ, **setting, "PYTHONPATH": os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH", "").replace(str(ROOT), str(tree)), str(tree))
        if p)}
    done = subprocess.run([sys.executable, "-c", ONE, task, shapes, "1" if parent else "0"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        return {"wall_s": None, "ok": False, "error": done.stderr[-600:]}
    return json.loads(lines[-1])


def markdown(report: dict) -> str:
    """The table: per task and arm, the median and range of wall seconds, and the ratio
    of medians to the base."""
    commands = " then ".join(f"`{c}`" for c in report["commands"])
    lines = [f"# Cost per evaluation on {report['gpu']}: this checkout vs {report['base']}", "",
             f"{commands}: the naive kernel judged against itself, wall seconds of the judged "
             "evaluation, fresh process each, the arms alternating.", "",
             "| task | arm | median [range] | ratio to the first arm | runs |",
             "|---|---|---|---|---|"]
    for task, by_arm in report["rows"].items():
        walls = {arm: [e["wall_s"] for e in entries if e["ok"] and e["wall_s"]]
                 for arm, entries in by_arm.items()}
        first = walls[next(iter(walls))]  # the ratios are to the first arm run
        base = statistics.median(first) if first else None
        for arm, w in walls.items():
            med = statistics.median(w) if w else None
            cell = f"{med:.2f} s [{min(w):.2f}, {max(w):.2f}]" if w else "failed"
            ratio = f"{med / base:.2f}x" if med and base else "-"
            lines.append(f"| {task} | {arm} | {cell} | {ratio} | {len(by_arm[arm])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="the earlier checkout")
    parser.add_argument("--tasks", nargs="+", default=["softmax", "rmsnorm", "matmul"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--setting", action="append", default=[],
                        metavar="NAME:VAR=VALUE[,VAR=VALUE]",
                        help="an arm: this checkout with these settings in its environment")
    parser.add_argument("--shapes", default="representative",
                        help="the shape set evaluated (auto: cpu + edge on the interpreter)")
    parser.add_argument("--arms", nargs="+", metavar="ARM",
                        help="run only these arms, in this order (base, this, a --setting's)")
    parser.add_argument("--no-parent", action="store_true",
                        help="judge without an incumbent (the CPU interpreter times nothing)")
    args = parser.parse_args(argv)
    base = args.base.resolve()
    if not (base / "optimizer" / "sandbox").is_dir():
        raise SystemExit(f"--base {base}: not a checkout of this project")
    import torch

    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    named = base / "REVISION"  # written beside the archive (see above)
    revision = named.read_text().strip() if named.is_file() else base.name
    arms: dict[str, tuple[Path, dict[str, str]]] = {"base": (base, {}), "this": (ROOT, {})}
    for spec in args.setting:
        name, _, assignments = spec.partition(":")
        pairs = [a.partition("=") for a in assignments.split(",")]
        if not name or not all(var and eq for var, eq, _ in pairs):
            parser.error(f"--setting {spec!r}: NAME:VAR=VALUE[,VAR=VALUE]")
        arms[name] = (ROOT, {var: value for var, _, value in pairs})
    if args.arms:
        unknown = set(args.arms) - set(arms)
        if unknown:
            parser.error(f"--arms {sorted(unknown)}: not among {list(arms)}")
        arms = {name: arms[name] for name in args.arms}
    rows: dict[str, dict[str, list]] = {t: {a: [] for a in arms} for t in args.tasks}
    t0 = time.monotonic()
    for task in args.tasks:
        for r in range(args.repeats):
            turn = r % len(arms)
            order = list(arms)[turn:] + list(arms)[:turn]
            for arm in order:
                tree, setting = arms[arm]
                entry = one(tree, task, setting, args.shapes, not args.no_parent)
                rows[task][arm].append(entry)
                laps = entry.get("worker_laps_s") or {}
                print(f"    worker steps (s): {laps}", flush=True)
                print(f"    worker process {entry.get('worker_process_s')} s, then waited "
                      f"{entry.get('interpreter_wait_s') or '-'} s for the interpreter pass; "
                      f"judge (s): {(entry.get('judge') or {}).get('laps_s')}", flush=True)
                print(f"    incumbent's own evaluation {entry.get('parent_wall_s')} s; trusted "
                      f"compile {entry.get('trusted_compile')}; read from the layer "
                      f"{entry.get('trusted_layer_reads')}", flush=True)
                print(f"[{time.monotonic() - t0:6.0f} s] {task} repeat {r} {arm}: "
                      f"{entry['wall_s'] if entry['wall_s'] is None else round(entry['wall_s'], 2)}"
                      f" s{'' if entry['ok'] else ' FAILED ' + str(entry['error'])[:300]}",
                      flush=True)
    report = {"gpu": gpu, "base": revision, "commands": ["python benchmarks/eval_cost.py "
              + " ".join(sys.argv[1:] if argv is None else argv)], "rows": rows}
    text = markdown(report)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    slug = gpu.lower().replace("nvidia ", "").replace(" ", "_")
    (args.out / f"eval_cost_{slug}.json").write_text(json.dumps(report, indent=1))
    (args.out / f"eval_cost_{slug}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
